// CPU tests of chapter 07's bookkeeping: the ledger counts 2-byte elements (and a float32
// lse), every variant lists the dtypes and head dims it was compiled for, and the C API
// refuses what the chapter cannot run.
#include <gtest/gtest.h>

#include "harness/traffic.hpp"
#include "07_tensor_core_forward/flash_forward.hpp"
#include "api/flashtut.h"

namespace {

TEST(Ch07Ledger, HalfPrecisionMovesHalfTheBytes) {
  // One head, N = 4096, d = 128: Q, K, V, O of 4096·128 elements, lse of 4096 floats.
  ft::Problem p = ft::make_problem(1, 1, 4096, 128, false, ft::DType::BFloat16);
  const auto kernels = ch07::fastest().traffic(p);
  ASSERT_EQ(kernels.size(), 1u);
  const double tensor = 4096.0 * 128 * 2;
  EXPECT_DOUBLE_EQ(kernels[0].dram_read_bytes, 3 * tensor);  // K, V re-reads hit L2
  EXPECT_DOUBLE_EQ(kernels[0].dram_write_bytes, tensor + 4096.0 * 4);
  EXPECT_DOUBLE_EQ(kernels[0].flops, 4.0 * 4096 * 4096 * 128);
  p.dtype = ft::DType::Float32;  // the same formula in chapter 04's float32: twice the bytes
  EXPECT_DOUBLE_EQ(ft::fused_forward_traffic(p, "k", 128, 64).dram_read_bytes, 6 * tensor);
}

TEST(Ch07Impls, ListWhatTheyCompile) {
  for (const auto& impl : ch07::forward_impls()) {
    EXPECT_EQ(impl.dtypes, (std::vector<ft::DType>{ft::DType::BFloat16, ft::DType::Float16}))
        << impl.variant;
    EXPECT_EQ(impl.workspace_bytes(ft::make_problem(2, 3, 100, 64)), 0u) << impl.variant;
  }
}

TEST(Ch07CApi, RefusesFloat32AndOddHeadDims) {
  ft_problem p{2, 3, 3, 64, 64, 64, 0, FT_CAUSAL_TOP_LEFT, 0.f, FT_DTYPE_FLOAT32};
  EXPECT_EQ(ft_forward("ch07", p, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0), -1);
  EXPECT_NE(std::string(ft_last_error()).find("does not support dtype float32"), std::string::npos)
      << ft_last_error();
  p.dtype = FT_DTYPE_BF16;
  p.head_dim = 32;
  EXPECT_EQ(ft_forward("ch07", p, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0), -1);
  EXPECT_EQ(ft_forward_workspace_bytes("ch07", p), FT_WORKSPACE_ERROR);
  p.head_dim = 128;
  EXPECT_EQ(ft_forward_workspace_bytes("ch07", p), 0u);
}

}  // namespace
