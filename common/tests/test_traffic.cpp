// CPU tests of the traffic model's building blocks and FLOP counts, against numbers
// worked out by hand.
#include <gtest/gtest.h>

#include "problem.hpp"
#include "traffic.hpp"

namespace {

TEST(Traffic, TiledMatmulRereadsByTileCount) {
  // 64×64 = 64×64 · 64×64 in 32×32 tiles: 2 blocks along N re-read A, 2 along M re-read B.
  EXPECT_DOUBLE_EQ(ft::tiled_matmul_read_bytes(64, 64, 64, 32, 32), 2 * 2.0 * 64 * 64 * 4);
  // Ragged: N = 70 with tile 32 → ceil = 3 reads of A (100×16); M = 100 → 4 reads of B (16×70).
  EXPECT_DOUBLE_EQ(ft::tiled_matmul_read_bytes(100, 70, 16, 32, 32),
                   3 * 100.0 * 16 * 4 + 4 * 16.0 * 70 * 4);
  // A tile as large as the matrix reads each operand once.
  EXPECT_DOUBLE_EQ(ft::tiled_matmul_read_bytes(8, 8, 8, 8, 8), 2 * 8.0 * 8 * 4);
}

TEST(Traffic, VisiblePairs) {
  ft::Problem p;
  p.seq_len = 4;
  EXPECT_DOUBLE_EQ(ft::visible_pairs(p), 16);
  p.causal = true;
  EXPECT_DOUBLE_EQ(ft::visible_pairs(p), 10);  // 1 + 2 + 3 + 4
}

TEST(Traffic, CausalTileFraction) {
  ft::Problem p;
  p.seq_len = 128;
  EXPECT_DOUBLE_EQ(ft::visited_tile_fraction(p, 64, 64), 1.0);
  p.causal = true;
  EXPECT_DOUBLE_EQ(ft::visited_tile_fraction(p, 64, 64), 0.75);  // 3 of 2×2 tiles
  p.seq_len = 100;  // the last query tile holds rows 64..99: sees key tiles 0 and 1
  EXPECT_DOUBLE_EQ(ft::visited_tile_fraction(p, 64, 64), 0.75);
  p.seq_len = 1;
  EXPECT_DOUBLE_EQ(ft::visited_tile_fraction(p, 64, 64), 1.0);
  p.seq_len = 256;  // Br = 128, Bc = 64: tile 0 sees key tiles 0–1, tile 1 sees 0–3 → 6 of 8
  EXPECT_DOUBLE_EQ(ft::visited_tile_fraction(p, 128, 64), 0.75);
}

TEST(Traffic, TotalSumsEveryColumn) {
  ft::KernelTraffic a{"a", 1, 2, 3, 4, 5, ""}, b{"b", 10, 20, 30, 40, 50, ""};
  const auto t = ft::total({a, b});
  EXPECT_EQ(t.kernel, "total");
  EXPECT_DOUBLE_EQ(t.read_bytes, 11);
  EXPECT_DOUBLE_EQ(t.write_bytes, 22);
  EXPECT_DOUBLE_EQ(t.dram_bytes(), 77);
  EXPECT_DOUBLE_EQ(t.flops, 55);
  EXPECT_DOUBLE_EQ(t.intensity(), 55.0 / 77);
}

TEST(Traffic, L2Share) {
  EXPECT_TRUE(ft::fits_l2(8.0 * 1024 * 1024));    // K+V of one head at N = 16384, d = 64
  EXPECT_FALSE(ft::fits_l2(1024.0 * 1024 * 1024));  // an N×N grid at N = 16384
}

TEST(ProblemFlops, AsThePapersCount) {
  ft::Problem p = ft::make_problem(2, 3, 10, 4);
  EXPECT_DOUBLE_EQ(p.forward_flops(), 4.0 * 6 * 10 * 10 * 4);
  EXPECT_DOUBLE_EQ(p.backward_flops(), 2.5 * 4.0 * 6 * 10 * 10 * 4);
  p.causal = true;
  EXPECT_DOUBLE_EQ(p.forward_flops(), 2.0 * 6 * 10 * 10 * 4);
  EXPECT_FLOAT_EQ(p.softmax_scale(), 0.5f);
  EXPECT_EQ(p.grid_bytes(), size_t(6 * 10 * 10 * 4));
  // 16384 tokens at N = 16384 with 32 heads: the score grid is 32 GiB, past 2^31 elements.
  ft::Problem big;
  big.heads = 32;
  big.seq_len = 16384;
  EXPECT_EQ(big.grid_bytes(), size_t(32) << 30);
}

}  // namespace
