// CPU tests of chapter 05's memory ledger: the formulas against numbers worked out by hand
// (README, "The ledger"). No CUDA call is made. The flash tests take the tile from
// backward.hpp (kFlashBr, kFlashBc, kWideKeysBc) and count the rows the blocks load by
// walking the kernels' loops, so they follow a change of the tile; the comments give the
// numbers at the shipped 64×64 (and 64×128), which query_rows_loaded and key_rows_loaded
// are checked against first.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "05_backward/backward.hpp"

namespace {

using ch05::kFlashBc;
using ch05::kFlashBr;
using ch05::kWideKeysBc;

ft::KernelTraffic line(const std::vector<ft::KernelTraffic>& ledger, const std::string& k) {
  for (const auto& t : ledger)
    if (t.kernel == k) return t;
  throw std::runtime_error("no ledger line " + k);
}

/// Query rows the dK/dV blocks load in all, walking them as dkdv_block does: the block of
/// keys k0… loads the query tiles from the first one (causal: the tile holding key k0) on.
double query_rows_loaded(int N, int Br, int Bc, bool causal) {
  double rows = 0;
  for (int k0 = 0; k0 < N; k0 += Bc)
    for (int q0 = causal ? k0 / Br * Br : 0; q0 < N; q0 += Br) rows += std::min(Br, N - q0);
  return rows;
}

/// Key rows the dQ-pass blocks load in all, walking them as flash_backward_dq does: the
/// block of queries q0… loads the key tiles up to its last query (causal) or all of them.
double key_rows_loaded(int N, int Br, int Bc, bool causal) {
  double rows = 0;
  for (int q0 = 0; q0 < N; q0 += Br) {
    const int k_end = causal ? std::min(q0 + Br, N) : N;
    for (int k0 = 0; k0 < k_end; k0 += Bc) rows += std::min(Bc, N - k0);
  }
  return rows;
}

TEST(Ch05Ledger, RowsLoadedByHand) {
  // N = 128, 64×64: two key tiles, each loading both query tiles.
  EXPECT_EQ(query_rows_loaded(128, 64, 64, false), 2 * 128.0);
  // N = 130, 64×64, causal: tiles of 64, 64, 2 rows; query tile i is loaded by the key
  // blocks j ≤ i: 64·1 + 64·2 + 2·3 = 198 rows. The dQ pass: key tile j is loaded by the
  // query blocks i ≥ j: 64·3 + 64·2 + 2·1 = 322 rows.
  EXPECT_EQ(query_rows_loaded(130, 64, 64, true), 198.0);
  EXPECT_EQ(key_rows_loaded(130, 64, 64, true), 322.0);
  // N = 300, 64×128, causal: query tiles of 64,64,64,64,44 rows; key blocks start at query
  // tiles 0, 2, 4, so the tiles are loaded 1,1,2,2,3 times: 64+64+128+128+132 = 516.
  EXPECT_EQ(query_rows_loaded(300, 64, 128, true), 516.0);
  // Non-causal, 64×128: three key blocks each load all 300 query rows.
  EXPECT_EQ(query_rows_loaded(300, 64, 128, false), 3 * 300.0);
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
  EXPECT_EQ(ch05::flash_sync().workspace_bytes(p), 24000u);
  EXPECT_EQ(ch05::flash_dq_pass().workspace_bytes(p), 24000u);
  // O(N): doubling N doubles it (materialize quadruples).
  const ft::Problem p2 = ft::make_problem(2, 3, 2000, 64, true);
  EXPECT_EQ(ch05::flash().workspace_bytes(p2), 2 * ch05::flash().workspace_bytes(p));
}

TEST(Ch05Ledger, FlashAtomicSmallNonCausal) {
  // B = H = 1, N = 128, d = 64: at 64×64, two key tiles, two query tiles, each query tile
  // loaded twice.
  const auto ledger = ch05::flash_traffic(ft::make_problem(1, 1, 128, 64, false));
  ASSERT_EQ(ledger.size(), 2u);
  const ft::KernelTraffic D = line(ledger, "dot_dO_O");
  EXPECT_DOUBLE_EQ(D.read_bytes, 2.0 * 128 * 64 * 4);            // O and dO
  EXPECT_DOUBLE_EQ(D.write_bytes, 128.0 * 4 + 128.0 * 64 * 4);   // D, and dQ cleared
  const ft::KernelTraffic k = line(ledger, "flash_backward_atomic_dq");
  const double rows = query_rows_loaded(128, kFlashBr, kFlashBc, false);  // 2 blocks × 128
  // K, V once (65 536) + 256 rows × (Q, dO: 2·64 floats; L, D: 2) × 4 bytes.
  EXPECT_DOUBLE_EQ(k.read_bytes, 65536.0 + rows * 130 * 4);  // 198 656
  // dK, dV once (65 536) + dQ atomics: 256 rows × 64 floats × 4 bytes.
  EXPECT_DOUBLE_EQ(k.write_bytes, 65536.0 + rows * 64 * 4);  // 131 072
  // DRAM: Q, K, V, dO once (131 072) + L, D (1 024) + dQ zeros read back (32 768).
  EXPECT_DOUBLE_EQ(k.dram_read_bytes, 131072.0 + 1024 + 32768);
  EXPECT_DOUBLE_EQ(k.dram_write_bytes, 65536.0 + 32768);
  EXPECT_DOUBLE_EQ(k.flops, 10.0 * 128 * 128 * 64);  // 2.5 × the forward's 4·N²·d
}

TEST(Ch05Ledger, FlashSyncMovesFlashsBytes) {
  // flash_sync copies the same tiles with plain loads instead of cp.async: its ledger is
  // flash's line for line (N = 130 causal: 198 query rows loaded, RowsLoadedByHand), only
  // the kernel's name differs.
  for (const bool causal : {false, true}) {
    const ft::Problem p = ft::make_problem(1, 1, 130, 64, causal);
    const auto sync = ch05::flash_sync_traffic(p), async = ch05::flash_traffic(p);
    ASSERT_EQ(sync.size(), 2u);
    ASSERT_EQ(async.size(), 2u);
    EXPECT_EQ(sync[0].kernel, "dot_dO_O");
    EXPECT_EQ(sync[1].kernel, "flash_backward_atomic_dq_sync");
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_DOUBLE_EQ(sync[i].read_bytes, async[i].read_bytes);
      EXPECT_DOUBLE_EQ(sync[i].write_bytes, async[i].write_bytes);
      EXPECT_DOUBLE_EQ(sync[i].dram_read_bytes, async[i].dram_read_bytes);
      EXPECT_DOUBLE_EQ(sync[i].dram_write_bytes, async[i].dram_write_bytes);
      EXPECT_DOUBLE_EQ(sync[i].flops, async[i].flops);
    }
    const double rows = query_rows_loaded(130, kFlashBr, kFlashBc, causal);  // 198 causal
    EXPECT_DOUBLE_EQ(sync[1].read_bytes, 2.0 * 130 * 64 * 4 + rows * 130 * 4);
  }
  EXPECT_EQ(ch05::flash_sync().traffic, &ch05::flash_sync_traffic);  // what the program prints
}

TEST(Ch05Ledger, FlashCausalRaggedTiles) {
  // N = 130, d = 64: at 64×64, tiles of 64, 64, 2 rows. Causal: query tile i is loaded by
  // blocks j ≤ i, so 198 query rows are loaded in all.
  const ft::Problem p = ft::make_problem(1, 1, 130, 64, true);
  const ft::KernelTraffic k = line(ch05::flash_traffic(p), "flash_backward_atomic_dq");
  const double q_rows = query_rows_loaded(130, kFlashBr, kFlashBc, true);  // 198
  EXPECT_DOUBLE_EQ(k.read_bytes, 2.0 * 130 * 64 * 4 + q_rows * 130 * 4);  // 169 520
  EXPECT_DOUBLE_EQ(k.write_bytes, 2.0 * 130 * 64 * 4 + q_rows * 64 * 4);  // 117 248
  EXPECT_DOUBLE_EQ(k.flops, 10.0 * 130 * 130 * 64 / 2);

  // The dQ pass: key tile j is loaded by query blocks i ≥ j: 322 rows at 64×64.
  const auto ledger = ch05::flash_dq_pass_traffic(p);
  const ft::KernelTraffic dq = line(ledger, "flash_backward_dq");
  const double k_rows = key_rows_loaded(130, kFlashBr, kFlashBc, true);  // 322
  EXPECT_DOUBLE_EQ(dq.read_bytes, 2.0 * 130 * 64 * 4 + 2.0 * 130 * 4 + k_rows * 2 * 64 * 4);
  EXPECT_DOUBLE_EQ(dq.write_bytes, 130.0 * 64 * 4);
  EXPECT_DOUBLE_EQ(dq.flops, 6.0 * 130 * 130 * 64 / 2);  // three products again
  const ft::KernelTraffic dkdv = line(ledger, "flash_backward_dkdv");
  EXPECT_DOUBLE_EQ(dkdv.write_bytes, 2.0 * 130 * 64 * 4);  // no dQ atomics
  EXPECT_DOUBLE_EQ(dkdv.flops, 8.0 * 130 * 130 * 64 / 2);
  // Recomputing for the separate dQ pass costs 40% more FLOPs than the papers' count.
  EXPECT_DOUBLE_EQ((dkdv.flops + dq.flops) / p.backward_flops(), 1.4);
}

TEST(Ch05Ledger, WideKeysCausal) {
  // N = 300, d = 64, Br = 64, Bc = 128 (kWideKeysBc): query tiles of 64,64,64,64,44 rows,
  // loaded 516 times in all (RowsLoadedByHand).
  const ft::Problem p = ft::make_problem(1, 1, 300, 64, true);
  const ft::KernelTraffic k = line(ch05::flash_wide_keys_traffic(p), "flash_backward_atomic_dq");
  const double rows = query_rows_loaded(300, kFlashBr, kWideKeysBc, true);  // 516
  EXPECT_DOUBLE_EQ(k.read_bytes, 2.0 * 300 * 64 * 4 + rows * 130 * 4);  // 421 920
  EXPECT_DOUBLE_EQ(k.write_bytes, 2.0 * 300 * 64 * 4 + rows * 64 * 4);  // 285 696
  // Non-causal: every key block loads all 300 query rows, three blocks of 128 keys, five of
  // 64: the wide keys take 3/5 of the atomics.
  const ft::Problem q = ft::make_problem(1, 1, 300, 64, false);
  const ft::KernelTraffic wide = line(ch05::flash_wide_keys_traffic(q), "flash_backward_atomic_dq");
  const ft::KernelTraffic narrow = line(ch05::flash_traffic(q), "flash_backward_atomic_dq");
  const double wide_blocks = ft::ceil_div(300, kWideKeysBc);  // 3
  const double narrow_blocks = ft::ceil_div(300, kFlashBc);   // 5
  EXPECT_DOUBLE_EQ(wide.write_bytes, 2.0 * 300 * 64 * 4 + wide_blocks * 300.0 * 64 * 4);
  EXPECT_DOUBLE_EQ(narrow.write_bytes, 2.0 * 300 * 64 * 4 + narrow_blocks * 300.0 * 64 * 4);
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
  EXPECT_LT(flash, 12.0 * p.q_bytes());
}

}  // namespace
