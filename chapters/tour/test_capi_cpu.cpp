// Tests of the C API (common/flashtut.h) that need no GPU: argument errors come back as
// codes with a one-line message (nothing is launched), and the workspace sizes are what the
// chapters document.
#include <gtest/gtest.h>

#include <string>

#include "flashtut.h"

namespace {

ft_problem problem(int N, int d, bool causal) { return ft_problem{2, 3, N, d, causal ? 1 : 0, 0.f}; }

TEST(CApiErrors, UnsupportedHeadDimIsReportedNotLaunched) {
  const ft_problem p = problem(64, 48, false);  // chapter 04 compiles d = 32, 64, 128 only
  const int rc = ft_ch04_forward(p, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0);
  EXPECT_EQ(rc, -1);
  EXPECT_NE(std::string(ft_last_error()).find("head_dim 48"), std::string::npos) << ft_last_error();
}

TEST(CApiErrors, NonPositiveShapeIsReported) {
  ft_problem p = problem(64, 64, false);
  p.seq_len = 0;
  EXPECT_EQ(ft_ch01_forward(p, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0), -1);
  EXPECT_NE(std::string(ft_last_error()).find("seq_len"), std::string::npos) << ft_last_error();
  p.seq_len = 64;
  p.batch = -1;
  EXPECT_EQ(ft_ch05_backward(p, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                             nullptr, nullptr, nullptr, 0),
            -1);
  EXPECT_EQ(ft_ch03_row_softmax(7, nullptr, nullptr, 1, 1, 0), -1);
  EXPECT_NE(std::string(ft_last_error()).find("variant"), std::string::npos);
}

TEST(CApiWorkspace, GridForTheMaterializingChaptersNoneForTheFusedOne) {
  const ft_problem p = problem(100, 64, false);
  const size_t grid = size_t(2) * 3 * 100 * 100 * sizeof(float);  // B·H·N·N floats
  EXPECT_EQ(ft_ch01_forward_workspace_bytes(p), grid);
  EXPECT_GE(ft_ch02_forward_workspace_bytes(p), grid);
  EXPECT_GE(ft_ch03_forward_workspace_bytes(p), grid);
  EXPECT_EQ(ft_ch04_forward_workspace_bytes(p), 0u);
  EXPECT_EQ(ft_ch04_forward_simple_workspace_bytes(p), 0u);
  EXPECT_GE(ft_ch05_backward_materialize_workspace_bytes(p), 2 * grid);  // P and dP
  // The flash backward keeps O(N) beside its inputs: D, one float per query row.
  EXPECT_LT(ft_ch05_backward_workspace_bytes(p), grid / 10);
  EXPECT_LT(ft_ch05_backward_dq_pass_workspace_bytes(p), grid / 10);
}

}  // namespace
