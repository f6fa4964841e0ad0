// CPU tests of chapter 10's ledger (no CUDA call): the bytes worked out by hand for a small
// grouped-head problem whose query and key lengths differ, where the model must count K and
// V by the key/value heads and keys, and Q, dO, L, D and the accumulator by the query heads
// and queries.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "10_hopper_backward/hopper_backward.hpp"

namespace {

const ft::BackwardImpl& step(const std::string& variant) {
  static const std::vector<ft::BackwardImpl> impls = ch10::backward_impls();
  for (const auto& i : impls)
    if (i.variant == variant) return i;
  throw std::runtime_error("no chapter 10 variant " + variant);
}

ft::KernelTraffic line(const std::vector<ft::KernelTraffic>& ledger, const std::string& k) {
  for (const auto& t : ledger)
    if (t.kernel == k) return t;
  throw std::runtime_error("no ledger line " + k);
}

// B = 1, four query heads on one key/value head, N_q = 100 queries against N_k = 300 keys,
// d = 128, bf16, not causal. One row of Q, K, V, dO: 128 · 2 = 256 bytes; of the float32
// accumulator 512; L and D 4 bytes each. Three key blocks of 128 keys (Bc) each visit all
// 4 · 100 query rows.
ft::Problem grouped_problem() {
  const ft::Problem p = ft::with_kv(ft::make_problem(1, 4, 100, 128, false, ft::DType::BFloat16), 300, 1);
  p.validate();
  return p;
}

TEST(Ch10Ledger, GroupedHeadsCountKeysByTheirHeadAndQueriesByTheirs) {
  const ft::Problem p = grouped_problem();
  for (const std::string variant : {"specialized", "fastest"}) {
    const ft::KernelTraffic k = line(step(variant).traffic(p), "specialized_backward");
    // Requested: K, V once (2 · 300 · 256 = 153 600) and every key block's reads of each query
    // row's Q, dO (512 bytes) and L, D (8): 3 blocks × 400 rows × 520.
    EXPECT_DOUBLE_EQ(k.read_bytes, 153600.0 + 3 * 400 * 520.0) << variant;
    // Device memory: K, V (153 600); Q, dO (2 · 400 · 256 = 204 800); L, D (400 · 8 = 3 200);
    // the accumulator once (400 · 512 = 204 800).
    EXPECT_DOUBLE_EQ(k.dram_read_bytes, 153600.0 + 204800 + 3200 + 204800) << variant;
    // dK, dV once and the accumulator once.
    EXPECT_DOUBLE_EQ(k.dram_write_bytes, 153600.0 + 204800) << variant;
    // Five products of 2 · N_q · N_k · d a query head.
    EXPECT_DOUBLE_EQ(k.flops, 5 * 2.0 * 100 * 300 * 128 * 4) << variant;
  }
}

TEST(Ch10Ledger, StepOneAddsTwoSharesATileStepTwoOne) {
  const ft::Problem p = grouped_problem();
  const ft::KernelTraffic one = line(step("wgmma").traffic(p), "wgmma_backward");
  const ft::KernelTraffic two = line(step("specialized").traffic(p), "specialized_backward");
  // dK, dV (153 600) and the float32 dQ shares: 3 blocks × 400 rows × 512 bytes, twice in
  // step 1 (one share a warpgroup), once in step 2.
  EXPECT_DOUBLE_EQ(one.write_bytes, 153600.0 + 2 * 3 * 400 * 512.0);
  EXPECT_DOUBLE_EQ(two.write_bytes, 153600.0 + 3 * 400 * 512.0);
}

TEST(Ch10Ledger, SmallKernelsStreamTheQueryRowsOnce) {
  const ft::Problem p = grouped_problem();
  const auto ledger = step("fastest").traffic(p);
  const ft::KernelTraffic prep = line(ledger, "prepare_backward");
  EXPECT_DOUBLE_EQ(prep.dram_read_bytes, 2 * 400 * 256.0 + 400 * 4.0);  // O, dO; lse
  const ft::KernelTraffic conv = line(ledger, "convert_dq");
  EXPECT_DOUBLE_EQ(conv.dram_read_bytes, 400 * 512.0);   // the accumulator
  EXPECT_DOUBLE_EQ(conv.dram_write_bytes, 400 * 256.0);  // dQ
}

}  // namespace
