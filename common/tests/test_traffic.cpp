// CPU tests of the traffic model's building blocks and FLOP counts, against numbers
// worked out by hand.
#include <gtest/gtest.h>

#include "core/check.cuh"
#include "core/problem.hpp"
#include "harness/traffic.hpp"

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
  p.len_q = p.len_kv = 4;
  EXPECT_DOUBLE_EQ(ft::visible_pairs(p), 16);
  p.causal = true;
  EXPECT_DOUBLE_EQ(ft::visible_pairs(p), 10);  // 1 + 2 + 3 + 4
}

TEST(Traffic, CausalTileFraction) {
  ft::Problem p;
  p.len_q = p.len_kv = 128;
  EXPECT_DOUBLE_EQ(ft::visited_tile_fraction(p, 64, 64), 1.0);
  p.causal = true;
  EXPECT_DOUBLE_EQ(ft::visited_tile_fraction(p, 64, 64), 0.75);  // 3 of 2×2 tiles
  p.len_q = p.len_kv = 100;  // the last query tile holds rows 64..99: sees key tiles 0 and 1
  EXPECT_DOUBLE_EQ(ft::visited_tile_fraction(p, 64, 64), 0.75);
  p.len_q = p.len_kv = 1;
  EXPECT_DOUBLE_EQ(ft::visited_tile_fraction(p, 64, 64), 1.0);
  p.len_q = p.len_kv = 256;  // Br = 128, Bc = 64: tile 0 sees key tiles 0–1, tile 1 sees 0–3 → 6 of 8
  EXPECT_DOUBLE_EQ(ft::visited_tile_fraction(p, 128, 64), 0.75);
}

// Two lengths: 4 queries over 6 keys. Top-left: 1 + 2 + 3 + 4 pairs; bottom-right (offset 2):
// 3 + 4 + 5 + 6. Six queries over three keys bottom-right: 0 + 0 + 0 + 1 + 2 + 3.
TEST(Traffic, VisiblePairsOfTwoLengths) {
  ft::Problem p = ft::with_kv(ft::make_problem(1, 1, 4, 8, true), 6, 1, ft::CausalAlign::TopLeft);
  EXPECT_DOUBLE_EQ(ft::visible_pairs(p), 10);
  p.align = ft::CausalAlign::BottomRight;
  EXPECT_DOUBLE_EQ(ft::visible_pairs(p), 18);
  p = ft::with_kv(ft::make_problem(1, 1, 6, 8, true), 3, 1, ft::CausalAlign::BottomRight);
  EXPECT_DOUBLE_EQ(ft::visible_pairs(p), 6);
  p.causal = false;
  EXPECT_DOUBLE_EQ(ft::visible_pairs(p), 18);
  // 128 queries over 256 keys, 64×64 tiles, bottom-right: query tile 0 (rows 0-63) sees keys
  // up to 63 + 128: key tiles 0-2; tile 1 sees all 4: 7 of 2×4.
  p = ft::with_kv(ft::make_problem(1, 1, 128, 8, true), 256, 1, ft::CausalAlign::BottomRight);
  EXPECT_DOUBLE_EQ(ft::visited_tile_fraction(p, 64, 64), 7.0 / 8);
  p.align = ft::CausalAlign::TopLeft;  // tile 0 sees key tile 0, tile 1 tiles 0-1: 3 of 8
  EXPECT_DOUBLE_EQ(ft::visited_tile_fraction(p, 64, 64), 3.0 / 8);
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
  big.heads_q = big.heads_kv = 32;
  big.len_q = big.len_kv = 16384;
  EXPECT_EQ(big.grid_bytes(), size_t(32) << 30);
}

// Decoding's shape: 4 new tokens of 32 query heads over a cache of 8192 tokens of 8 key/value
// heads. Non-causal FLOPs are 4·B·H_q·N_q·N_kv·d; bottom-right causal the visible area,
// 4·8192 − 4²/2 pairs a head (the last 4 keys form the triangle).
TEST(ProblemFlops, TwoLengthsAndGroupedHeads) {
  ft::Problem p = ft::with_kv(ft::make_problem(1, 32, 4, 128), 8192, 8, ft::CausalAlign::BottomRight);
  EXPECT_EQ(p.group(), 4);
  EXPECT_EQ(p.kv_head(31), 7);
  EXPECT_EQ(p.elems(), int64_t(32) * 4 * 128);
  EXPECT_EQ(p.kv_elems(), int64_t(8) * 8192 * 128);
  EXPECT_DOUBLE_EQ(p.forward_flops(), 4.0 * 32 * 4 * 8192 * 128);
  p.causal = true;
  EXPECT_DOUBLE_EQ(p.forward_flops(), 4.0 * 32 * (4 * 8192 - 8) * 128);
  EXPECT_EQ(p.describe(), "B=1 Hq=32 Hkv=8 Nq=4 Nkv=8192 d=128 causal(bottom-right)");
  p.align = ft::CausalAlign::TopLeft;  // query i sees keys 0..i: 1 + 2 + 3 + 4 ≈ 4²/2
  EXPECT_DOUBLE_EQ(p.forward_flops(), 4.0 * 32 * 8 * 128);
}

TEST(ProblemValidate, TheKeyValueSideIsChecked) {
  ft::Problem p = ft::with_kv(ft::make_problem(2, 6, 16, 64), 32, 4);
  EXPECT_THROW(p.validate(), ft::Unsupported);  // 6 query heads over 4 key/value heads
  p.heads_kv = 3;
  EXPECT_NO_THROW(p.validate());
  p.len_kv = 0;
  EXPECT_THROW(p.validate(), ft::Unsupported);
  p.len_kv = 1 << 25;
  EXPECT_THROW(p.validate(), ft::Unsupported);
  p.len_kv = 1;
  p.align = static_cast<ft::CausalAlign>(7);
  EXPECT_THROW(p.validate(), ft::Unsupported);
}

}  // namespace
