// CPU tests of chapter 02's memory ledger, against numbers worked out by hand. The tile
// counts come from kMatmulTile (tiled_matmul.cuh) and the rows in flight from
// kSoftmaxThreads (tiled.hpp), so the tests follow those constants; the comments give the
// numbers at the shipped 64 and 256.
#include <gtest/gtest.h>

#include "02_tiled/tiled.hpp"
#include "02_tiled/tiled_matmul.cuh"

namespace {

/// Tiles of kMatmulTile that cover n rows (or columns).
double tiles(int n) { return ft::ceil_div(n, ch02::kMatmulTile); }

TEST(Ch02Ledger, TiledMatmulByHand) {
  // 100×70 = 100×16 · 16×70 in 64×64 tiles, 2 matrices: 2 column tiles re-read A,
  // 2 row tiles re-read B.
  const ft::KernelTraffic t = ch02::tiled_matmul_traffic("test", 100, 70, 16, 2, true);
  EXPECT_EQ(t.kernel, "tiled_matmul_kernel");
  EXPECT_DOUBLE_EQ(t.read_bytes, 2 * (tiles(70) * 100 * 16 * 4.0 + tiles(100) * 16 * 70 * 4.0));
  EXPECT_DOUBLE_EQ(t.write_bytes, 2 * 100 * 70 * 4.0);
  EXPECT_DOUBLE_EQ(t.dram_read_bytes, 2 * (100 * 16 * 4.0 + 16 * 70 * 4.0));  // each once
  EXPECT_DOUBLE_EQ(t.dram_write_bytes, t.write_bytes);
  EXPECT_DOUBLE_EQ(t.flops, 2.0 * 100 * 70 * 16 * 2);
  const ft::KernelTraffic spill = ch02::tiled_matmul_traffic("test", 100, 70, 16, 2, false);
  EXPECT_DOUBLE_EQ(spill.dram_read_bytes, spill.read_bytes);
}

TEST(Ch02Ledger, TinyProblemByHand) {
  // 2 heads, N = 4, d = 2: grid 128 B, one tensor 64 B, lse 32 B; one tile covers all
  // (any kMatmulTile ≥ 4).
  const auto k = ch02::traffic(ft::make_problem(1, 2, 4, 2, true));
  ASSERT_EQ(k.size(), 3u);
  EXPECT_DOUBLE_EQ(k[0].read_bytes, 64 + 64);  // Q and K once each
  EXPECT_DOUBLE_EQ(k[0].write_bytes, 128);
  EXPECT_EQ(k[1].kernel, "softmax_rows_kernel");
  EXPECT_DOUBLE_EQ(k[1].read_bytes, 3 * 80);  // causal: 10 visible entries per head
  EXPECT_DOUBLE_EQ(k[1].dram_read_bytes, 80);
  EXPECT_DOUBLE_EQ(k[1].write_bytes, 128 + 32);
  EXPECT_DOUBLE_EQ(k[2].read_bytes, 128 + 64);  // P and V once each
  EXPECT_DOUBLE_EQ(k[2].write_bytes, 64);
  EXPECT_DOUBLE_EQ(ft::total(k).flops, ft::make_problem(1, 2, 4, 2, true).forward_flops());
}

TEST(Ch02Ledger, SoftmaxRereadsHitL2OnlyWhileRowsInFlightFit) {
  // One row per block of kSoftmaxThreads threads, as many blocks as the GPU holds: on the
  // H200 at 256 threads, 132·2048/256 = 1056 rows in flight. They fit in the model's half of
  // the L2 (30 MiB) while N ≤ 30 MiB / (1056 · 4 B) = 7447: at N = 4096, 1056 rows of 16 KB
  // (17 MB) do, and the grid is read from DRAM once; at N = 16384 (69 MB) they do not, and
  // all three passes reach DRAM. Checked on either side of that bound, wherever the
  // constant puts it.
  const double rows_in_flight = ft::resident_threads() / ch02::kSoftmaxThreads;
  const int n_fit = int(ft::l2_bytes() / 2 / (rows_in_flight * 4));
  for (const int N : {n_fit / 2, 2 * n_fit}) {
    const double grid = 32.0 * N * N * 4;
    const double reads = N <= n_fit ? 1 : 3;
    EXPECT_DOUBLE_EQ(ch02::traffic(ft::make_problem(1, 32, N, 64, false))[1].dram_read_bytes,
                     reads * grid)
        << "N = " << N;
  }
}

TEST(Ch02Ledger, ReadmeProblem) {
  const auto k = ch02::traffic(ft::make_problem(4, 32, 4096, 64, false));
  const double tensor = 128.0 * 4096 * 64 * 4;
  // S = Q·Kᵀ: Q re-read by 64 column tiles, K by 64 row tiles.
  EXPECT_DOUBLE_EQ(k[0].read_bytes, tiles(4096) * tensor + tiles(4096) * tensor);
  EXPECT_DOUBLE_EQ(k[0].dram_read_bytes, 2 * tensor);
  // O = P·V: P read by 1 column tile (d = 64), V by 64 row tiles.
  EXPECT_DOUBLE_EQ(k[2].read_bytes, tiles(64) * 128.0 * 4096 * 4096 * 4 + tiles(4096) * tensor);
}

}  // namespace
