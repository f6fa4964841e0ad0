// CPU tests of chapter 01's memory ledger, against numbers worked out by hand.
#include <gtest/gtest.h>

#include "01_naive/naive.hpp"

namespace {

// B·H = 2 heads of N = 4 queries, d = 2: grid 2·4·4 floats = 128 B, one tensor 64 B,
// lse 32 B. Everything fits in L2, so each kernel reads its inputs from DRAM once.
ft::Problem tiny(bool causal) { return ft::make_problem(1, 2, 4, 2, causal); }

TEST(Ch01Ledger, TinyProblemByHand) {
  const auto k = ch01::traffic(tiny(false));
  ASSERT_EQ(k.size(), 3u);
  EXPECT_EQ(k[0].kernel, "qk_naive_kernel");
  EXPECT_DOUBLE_EQ(k[0].read_bytes, 2 * 16 * (2 * 2) * 4.0);  // 32 elements × 2·d floats
  EXPECT_DOUBLE_EQ(k[0].write_bytes, 128);
  EXPECT_DOUBLE_EQ(k[0].dram_read_bytes, 128);  // Q and K once
  EXPECT_DOUBLE_EQ(k[0].dram_write_bytes, 128);
  EXPECT_DOUBLE_EQ(k[0].flops, 2.0 * 2 * 16 * 2);  // 2·N²·d per head
  EXPECT_EQ(k[1].kernel, "softmax_naive_kernel");
  EXPECT_DOUBLE_EQ(k[1].read_bytes, 3 * 128);  // three passes over the grid
  EXPECT_DOUBLE_EQ(k[1].write_bytes, 128 + 32);
  EXPECT_DOUBLE_EQ(k[1].dram_read_bytes, 128);  // tiny: the re-reads hit L2
  EXPECT_DOUBLE_EQ(k[1].dram_write_bytes, 160);
  EXPECT_EQ(k[2].kernel, "pv_naive_kernel");
  EXPECT_DOUBLE_EQ(k[2].read_bytes, 2 * 4 * 2 * (2 * 4) * 4.0);  // 16 elements × 2·N floats
  EXPECT_DOUBLE_EQ(k[2].write_bytes, 64);
  EXPECT_DOUBLE_EQ(k[2].dram_read_bytes, 128 + 64);  // P and V once
  EXPECT_DOUBLE_EQ(k[2].dram_write_bytes, 64);
}

TEST(Ch01Ledger, CausalSoftmaxReadsOnlyVisibleEntries) {
  const auto k = ch01::traffic(tiny(true));
  // 1 + 2 + 3 + 4 = 10 visible entries per head, 2 heads, 4 bytes: 80 B per pass.
  EXPECT_DOUBLE_EQ(k[1].read_bytes, 3 * 80);
  EXPECT_DOUBLE_EQ(k[1].write_bytes, 128 + 32);  // P is written in full (zeros above the diagonal)
  EXPECT_DOUBLE_EQ(k[0].write_bytes, 128);       // S is computed in full
  EXPECT_DOUBLE_EQ(k[0].flops + k[2].flops, tiny(true).forward_flops());
}

// The README's problem: B = 4, H = 32, N = 4096, d = 64.
TEST(Ch01Ledger, ReadmeProblem) {
  const ft::Problem p = ft::make_problem(4, 32, 4096, 64);
  const auto k = ch01::traffic(p);
  const double grid = 128.0 * 4096 * 4096 * 4;  // 8.59 GB
  const double tensor = 128.0 * 4096 * 64 * 4;  // 134 MB
  EXPECT_DOUBLE_EQ(k[0].dram_read_bytes, 2 * tensor);
  EXPECT_DOUBLE_EQ(k[0].dram_write_bytes, grid);
  EXPECT_DOUBLE_EQ(k[1].dram_read_bytes, 3 * grid);  // the rows in flight overflow L2
  EXPECT_DOUBLE_EQ(k[2].dram_read_bytes, grid + tensor);
  EXPECT_DOUBLE_EQ(ft::total(k).flops, p.forward_flops());
}

}  // namespace
