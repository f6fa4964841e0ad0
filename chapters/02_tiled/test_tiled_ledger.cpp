// CPU tests of chapter 02's memory ledger, against numbers worked out by hand. The tile
// counts come from kMatmulTile and kSmemTile (tiled_matmul.cuh) and the rows in flight from
// kSoftmaxThreads (tiled.hpp), so the tests follow those constants; the comments give the
// numbers at the shipped 64, 16 and 256.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>

#include "02_tiled/tiled.hpp"
#include "02_tiled/tiled_matmul.cuh"

namespace {

/// Tiles of kMatmulTile that cover n rows (or columns).
double tiles(int n) { return ft::ceil_div(n, ch02::kMatmulTile); }
/// Tiles of kSmemTile (the smem_tiles variant's) that cover n rows (or columns).
double smem_tiles(int n) { return ft::ceil_div(n, ch02::kSmemTile); }

/// Bytes of op(A) and op(B) a product's blocks load, walking them as the kernels do: block
/// (m0, n0) of tile×tile outputs steps along K in slabs of `slab` and loads the elements of
/// its slab that lie inside the matrices (load_slab reads nothing outside them).
double bytes_loaded(int M, int N, int K, int tile, int slab) {
  double elements = 0;
  for (int m0 = 0; m0 < M; m0 += tile)
    for (int n0 = 0; n0 < N; n0 += tile)
      for (int k0 = 0; k0 < K; k0 += slab) {
        const int k = std::min(slab, K - k0);
        elements += std::min(tile, M - m0) * k + k * std::min(tile, N - n0);
      }
  return elements * 4;
}

/// The ledger line of a 100×70 = 100×16 · 16×70 product, 2 matrices, by `traffic`
/// (tiled_matmul_traffic or smem_tiles_matmul_traffic), whose tiles cover 70 columns in
/// `col_tiles` and 100 rows in `row_tiles`: A is re-read by every column of tiles, B by
/// every row of them.
void expect_100x70_product(decltype(&ch02::tiled_matmul_traffic) traffic, const char* kernel,
                           double col_tiles, double row_tiles) {
  const ft::KernelTraffic t = traffic("test", 100, 70, 16, 2, true);
  EXPECT_EQ(t.kernel, kernel);
  EXPECT_DOUBLE_EQ(t.read_bytes, 2 * (col_tiles * 100 * 16 * 4.0 + row_tiles * 16 * 70 * 4.0));
  EXPECT_DOUBLE_EQ(t.write_bytes, 2 * 100 * 70 * 4.0);
  EXPECT_DOUBLE_EQ(t.dram_read_bytes, 2 * (100 * 16 * 4.0 + 16 * 70 * 4.0));  // each once
  EXPECT_DOUBLE_EQ(t.dram_write_bytes, t.write_bytes);
  EXPECT_DOUBLE_EQ(t.flops, 2.0 * 100 * 70 * 16 * 2);
  const ft::KernelTraffic spill = traffic("test", 100, 70, 16, 2, false);
  EXPECT_DOUBLE_EQ(spill.dram_read_bytes, spill.read_bytes);
}

TEST(Ch02Ledger, TiledMatmulByHand) {
  // In 64×64 tiles: 2 column tiles re-read A, 2 row tiles re-read B.
  expect_100x70_product(ch02::tiled_matmul_traffic, "tiled_matmul_kernel", tiles(70),
                        tiles(100));
}

TEST(Ch02Ledger, SmemTilesMatmulByHand) {
  // In 16×16 tiles: a block reads its 16 rows of op(A) and 16 columns of op(B) in full, one
  // 16×16 tile of each per step along K, so A is read once per column of tiles (5) and B
  // once per row of tiles (7): 2 · (5 · 6400 + 7 · 4480) = 126 720 bytes, 2.9×
  // tiled_matmul's 2 · (2 · 6400 + 2 · 4480) = 43 520.
  expect_100x70_product(ch02::smem_tiles_matmul_traffic, "smem_tiles_kernel", smem_tiles(70),
                        smem_tiles(100));
}

TEST(Ch02Ledger, ProductsReadWhatTheirBlocksLoad) {
  // The ledger's formula against a walk over the kernels' blocks and steps, on ragged
  // sizes (partial tiles and a partial last slab): tiled_matmul's 64-wide tiles in slabs of
  // 16, smem_tiles_matmul's 16×16 tiles.
  constexpr int kTiledSlab = 16;  // register_tiles.cuh's kSlab
  for (const auto& [M, N, K] : {std::tuple{100, 70, 16}, std::tuple{130, 65, 100},
                                std::tuple{37, 70, 19}, std::tuple{16, 128, 1000}}) {
    SCOPED_TRACE(std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K));
    EXPECT_DOUBLE_EQ(ch02::tiled_matmul_traffic("t", M, N, K, 1, true).read_bytes,
                     bytes_loaded(M, N, K, ch02::kMatmulTile, kTiledSlab));
    EXPECT_DOUBLE_EQ(ch02::smem_tiles_matmul_traffic("t", M, N, K, 1, true).read_bytes,
                     bytes_loaded(M, N, K, ch02::kSmemTile, ch02::kSmemTile));
  }
  // By hand at 37×70×19 in 16×16 tiles: 3 row tiles (16, 16, 5 rows) × 5 column tiles
  // (16, 16, 16, 16, 6) × 2 steps (16, 3 deep): A 37·19 elements per column tile, B 19·70
  // per row tile: (5 · 703 + 3 · 1330) · 4 = 30 020 bytes.
  EXPECT_DOUBLE_EQ(bytes_loaded(37, 70, 19, 16, 16), (5 * 703 + 3 * 1330) * 4.0);
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
  // One 16×16 tile covers it too: the smem_tiles variant's ledger is the same but for the
  // products' kernel name.
  const auto s = ch02::smem_tiles().traffic(ft::make_problem(1, 2, 4, 2, true));
  ASSERT_EQ(s.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(s[i].kernel, i == 1 ? "softmax_rows_kernel" : "smem_tiles_kernel");
    EXPECT_DOUBLE_EQ(s[i].read_bytes, k[i].read_bytes);
    EXPECT_DOUBLE_EQ(s[i].dram_bytes(), k[i].dram_bytes());
    EXPECT_DOUBLE_EQ(s[i].flops, k[i].flops);
  }
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

TEST(Ch02Ledger, SmemTilesReadmeProblem) {
  const ft::Problem p = ft::make_problem(4, 32, 4096, 64, false);
  const auto k = ch02::smem_tiles().traffic(p);
  const auto tiled = ch02::traffic(p);
  ASSERT_EQ(k.size(), 3u);
  const double tensor = 128.0 * 4096 * 64 * 4, grid = 128.0 * 4096 * 4096 * 4;
  // S = Q·Kᵀ: Q re-read by 256 column tiles, K by 256 row tiles (4× tiled's 64 and 64):
  // 68.7 GB requested.
  EXPECT_EQ(k[0].kernel, "smem_tiles_kernel");
  EXPECT_DOUBLE_EQ(k[0].read_bytes, smem_tiles(4096) * tensor + smem_tiles(4096) * tensor);
  // O = P·V: P read by 4 column tiles (d = 64 is four 16-wide tiles; tiled reads it once),
  // V by 256 row tiles: 34.4 + 34.4 GB.
  EXPECT_DOUBLE_EQ(k[2].read_bytes, smem_tiles(64) * grid + smem_tiles(4096) * tensor);
  // DRAM, the softmax and the FLOPs are tiled's: the re-reads are the L2's business.
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_DOUBLE_EQ(k[i].dram_read_bytes, tiled[i].dram_read_bytes) << k[i].kernel;
    EXPECT_DOUBLE_EQ(k[i].dram_write_bytes, tiled[i].dram_write_bytes) << k[i].kernel;
    EXPECT_DOUBLE_EQ(k[i].flops, tiled[i].flops) << k[i].kernel;
  }
  EXPECT_DOUBLE_EQ(k[1].read_bytes, tiled[1].read_bytes);
}

}  // namespace
