// CPU tests of chapter 05's memory ledger: the formulas against numbers worked out by hand
// (README, "The ledger"). No CUDA call is made.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "05_backward/backward.hpp"

namespace {

ft::KernelTraffic line(const std::vector<ft::KernelTraffic>& ledger, const std::string& k) {
  for (const auto& t : ledger)
    if (t.kernel == k) return t;
  throw std::runtime_error("no ledger line " + k);
}

TEST(Ch05Workspace, MaterializeIsTwoGridsPlusD) {
  const ft::Problem p = ft::make_problem(2, 3, 1000, 64, false);
  // P and dP: 2 · B·H·N² · 4 bytes = 2 · 6 · 10^6 · 4; D: B·H·N · 4 = 6000 · 4.
  EXPECT_EQ(ch05::materialize_workspace_bytes(p), 48000000u + 24000u);
  EXPECT_EQ(ch05::materialize().workspace_bytes(p), 48024000u);
  EXPECT_EQ(ch05::materialize_forward().workspace_bytes(p), 48024000u);
}

TEST(Ch05Workspace, FlashIsOnlyD) {
  const ft::Problem p = ft::make_problem(2, 3, 1000, 64, true);
  EXPECT_EQ(ch05::flash().workspace_bytes(p), 24000u);
  EXPECT_EQ(ch05::flash_dq_pass().workspace_bytes(p), 24000u);
  // O(N): doubling N doubles it (materialize quadruples).
  const ft::Problem p2 = ft::make_problem(2, 3, 2000, 64, true);
  EXPECT_EQ(ch05::flash().workspace_bytes(p2), 2 * ch05::flash().workspace_bytes(p));
}

TEST(Ch05Ledger, FlashAtomicSmallNonCausal) {
  // B = H = 1, N = 128, d = 64: two key tiles, two query tiles, each query tile loaded twice.
  const auto ledger = ch05::flash_traffic(ft::make_problem(1, 1, 128, 64, false));
  ASSERT_EQ(ledger.size(), 2u);
  const ft::KernelTraffic D = line(ledger, "dot_dO_O");
  EXPECT_DOUBLE_EQ(D.read_bytes, 2.0 * 128 * 64 * 4);            // O and dO
  EXPECT_DOUBLE_EQ(D.write_bytes, 128.0 * 4 + 128.0 * 64 * 4);   // D, and dQ cleared
  const ft::KernelTraffic k = line(ledger, "flash_backward_atomic_dq");
  // K, V once (65 536) + 2 blocks × 128 rows × (Q, dO: 2·64 floats; L, D: 2) × 4 bytes.
  EXPECT_DOUBLE_EQ(k.read_bytes, 65536.0 + 2 * 128 * 130 * 4);  // 198 656
  // dK, dV once (65 536) + dQ atomics: 2 blocks × 128 rows × 64 floats × 4 bytes.
  EXPECT_DOUBLE_EQ(k.write_bytes, 65536.0 + 65536.0);
  // DRAM: Q, K, V, dO once (131 072) + L, D (1 024) + dQ zeros read back (32 768).
  EXPECT_DOUBLE_EQ(k.dram_read_bytes, 131072.0 + 1024 + 32768);
  EXPECT_DOUBLE_EQ(k.dram_write_bytes, 65536.0 + 32768);
  EXPECT_DOUBLE_EQ(k.flops, 10.0 * 128 * 128 * 64);  // 2.5 × the forward's 4·N²·d
}

TEST(Ch05Ledger, FlashCausalRaggedTiles) {
  // N = 130, d = 64: tiles of 64, 64, 2 rows. Causal: query tile i is loaded by blocks j ≤ i,
  // so 64·1 + 64·2 + 2·3 = 198 query rows are loaded in all.
  const ft::Problem p = ft::make_problem(1, 1, 130, 64, true);
  const ft::KernelTraffic k = line(ch05::flash_traffic(p), "flash_backward_atomic_dq");
  EXPECT_DOUBLE_EQ(k.read_bytes, 2.0 * 130 * 64 * 4 + 198.0 * 130 * 4);  // 169 520
  EXPECT_DOUBLE_EQ(k.write_bytes, 2.0 * 130 * 64 * 4 + 198.0 * 64 * 4);  // 117 248
  EXPECT_DOUBLE_EQ(k.flops, 10.0 * 130 * 130 * 64 / 2);

  // The dQ pass: key tile j is loaded by query blocks i ≥ j: 64·3 + 64·2 + 2·1 = 322 rows.
  const auto ledger = ch05::flash_dq_pass_traffic(p);
  const ft::KernelTraffic dq = line(ledger, "flash_backward_dq");
  EXPECT_DOUBLE_EQ(dq.read_bytes, 2.0 * 130 * 64 * 4 + 2.0 * 130 * 4 + 322.0 * 2 * 64 * 4);
  EXPECT_DOUBLE_EQ(dq.write_bytes, 130.0 * 64 * 4);
  EXPECT_DOUBLE_EQ(dq.flops, 6.0 * 130 * 130 * 64 / 2);  // three products again
  const ft::KernelTraffic dkdv = line(ledger, "flash_backward_dkdv");
  EXPECT_DOUBLE_EQ(dkdv.write_bytes, 2.0 * 130 * 64 * 4);  // no dQ atomics
  EXPECT_DOUBLE_EQ(dkdv.flops, 8.0 * 130 * 130 * 64 / 2);
  // Recomputing for the separate dQ pass costs 40% more FLOPs than the papers' count.
  EXPECT_DOUBLE_EQ((dkdv.flops + dq.flops) / p.backward_flops(), 1.4);
}

TEST(Ch05Ledger, WideKeysCausal) {
  // N = 300, d = 64, Br = 64, Bc = 128: query tiles of 64,64,64,64,44 rows; key blocks start
  // at query tiles 0, 2, 4, so the tiles are loaded 1,1,2,2,3 times: 64+64+128+128+132 = 516.
  const ft::Problem p = ft::make_problem(1, 1, 300, 64, true);
  const ft::KernelTraffic k = line(ch05::flash_wide_keys_traffic(p), "flash_backward_atomic_dq");
  EXPECT_DOUBLE_EQ(k.read_bytes, 2.0 * 300 * 64 * 4 + 516.0 * 130 * 4);  // 421 920
  EXPECT_DOUBLE_EQ(k.write_bytes, 2.0 * 300 * 64 * 4 + 516.0 * 64 * 4);  // 285 696
  // Non-causal: three key blocks each load all 300 query rows; half the atomics of Bc = 64.
  const ft::Problem q = ft::make_problem(1, 1, 300, 64, false);
  const ft::KernelTraffic wide = line(ch05::flash_wide_keys_traffic(q), "flash_backward_atomic_dq");
  const ft::KernelTraffic narrow = line(ch05::flash_traffic(q), "flash_backward_atomic_dq");
  EXPECT_DOUBLE_EQ(wide.write_bytes, 2.0 * 300 * 64 * 4 + 3 * 300.0 * 64 * 4);
  EXPECT_DOUBLE_EQ(narrow.write_bytes, 2.0 * 300 * 64 * 4 + 5 * 300.0 * 64 * 4);
}

TEST(Ch05Ledger, MaterializeSoftmaxBackwardStreamsThreeGrids) {
  const ft::Problem p = ft::make_problem(4, 32, 4096, 64, false);
  const ft::KernelTraffic ds = line(ch05::materialize_traffic(p), "softmax_backward");
  const double grid = 4.0 * 32 * 4096 * 4096 * 4;  // 8.6 GB
  EXPECT_DOUBLE_EQ(ds.read_bytes, 2 * grid + 4.0 * 32 * 4096 * 4);
  EXPECT_DOUBLE_EQ(ds.write_bytes, grid);
  EXPECT_DOUBLE_EQ(ds.dram_write_bytes, grid);
}

TEST(Ch05Ledger, FlashMovesFarFewerDramBytesThanMaterialize) {
  // N² against N·d: at N = 4096, d = 64 the baseline's grids dwarf the flash backward.
  const ft::Problem p = ft::make_problem(4, 32, 4096, 64, false);
  const double flash = ft::total(ch05::flash_traffic(p)).dram_bytes();
  const double materialize = ft::total(ch05::materialize_traffic(p)).dram_bytes();
  EXPECT_GT(materialize, 20 * flash);
  // Flash: Q, K, V, O, dO read, dK, dV, dQ written, about 10 tensors of 134 MB; nothing N².
  EXPECT_LT(flash, 12.0 * p.tensor_bytes());
}

}  // namespace
