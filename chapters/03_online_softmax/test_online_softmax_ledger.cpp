// CPU tests of chapter 03's memory ledger, against numbers worked out by hand.
#include <gtest/gtest.h>

#include "03_online_softmax/online_softmax.hpp"

namespace {

TEST(Ch03Ledger, AttentionSoftmaxTwoReads) {
  // 2 heads, N = 4, causal: 10 visible entries per head, 80 B per read; grid 128 B, lse 32 B.
  const ft::KernelTraffic t = ch03::attention_softmax_traffic(ft::make_problem(1, 2, 4, 2, true));
  EXPECT_EQ(t.kernel, "online_softmax_kernel");
  EXPECT_DOUBLE_EQ(t.read_bytes, 2 * 80);
  EXPECT_DOUBLE_EQ(t.write_bytes, 128 + 32);
  EXPECT_DOUBLE_EQ(t.dram_read_bytes, 80);  // tiny: the second read hits L2
  // N = 16384: 1056 rows of 64 KB in flight overflow L2, both reads reach DRAM.
  const double grid16k = 32.0 * 16384 * 16384 * 4;
  EXPECT_DOUBLE_EQ(ch03::attention_softmax_traffic(ft::make_problem(1, 32, 16384, 64, false)).dram_read_bytes,
                   2 * grid16k);
}

TEST(Ch03Ledger, ForwardIsChapter02WithOneSoftmaxReadLess) {
  const auto k = ch03::traffic(ft::make_problem(4, 32, 4096, 64, false));
  ASSERT_EQ(k.size(), 3u);
  const double grid = 128.0 * 4096 * 4096 * 4;
  EXPECT_EQ(k[0].kernel, "tiled_matmul_kernel");
  EXPECT_DOUBLE_EQ(k[1].read_bytes, 2 * grid);
  EXPECT_DOUBLE_EQ(k[1].dram_read_bytes, grid);
  EXPECT_DOUBLE_EQ(ft::total(k).flops, ft::make_problem(4, 32, 4096, 64, false).forward_flops());
}

TEST(Ch03Ledger, RowSoftmaxVariants) {
  using ch03::RowSoftmax;
  const double bytes = 16384.0 * 16384 * 4;  // the benchmark at C = 16384: 1 GiB
  const ft::KernelTraffic safe = ch03::row_softmax_traffic(RowSoftmax::Safe, 16384, 16384);
  EXPECT_DOUBLE_EQ(safe.read_bytes, 3 * bytes);
  EXPECT_DOUBLE_EQ(safe.dram_read_bytes, 3 * bytes);  // 1056 rows × 64 KB overflow L2
  const ft::KernelTraffic online = ch03::row_softmax_traffic(RowSoftmax::Online, 16384, 16384);
  EXPECT_EQ(online.kernel, "online_softmax_registers_kernel");
  EXPECT_DOUBLE_EQ(online.dram_bytes(), 2 * bytes);  // exactly what a copy moves
  // Too long for registers: two reads.
  const ft::KernelTraffic longer = ch03::row_softmax_traffic(RowSoftmax::Online, 100, 40000);
  EXPECT_EQ(longer.kernel, "online_softmax_kernel");
  EXPECT_DOUBLE_EQ(longer.read_bytes, 2 * 100 * 40000 * 4.0);
}

}  // namespace
