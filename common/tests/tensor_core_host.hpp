/// @file tensor_core_host.hpp
/// @brief Host helpers of the tensor-core instruction tests (test_tensor_cores_gpu.cu for
/// sm80, test_wgmma_gpu.cu for sm90): 16-bit elements made and read on the host, and the
/// check of a product against the float64 sum of the same rounded inputs.
#pragma once

#include <gtest/gtest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "reference/inputs.hpp"

namespace ft::tc_test {

/// The products are exact and the sum is float32 in an order of the hardware's choosing, so
/// a result differs from the float64 sum of the same products by float32 roundings of the
/// partial sums only: for round-to-nearest in any order at most (k−1)·2^-24·Σ|products|,
/// 7.6e-6·Σ|products| at k = 128; random inputs land far below, and 1e-5 of Σ|products|
/// leaves room for the hardware's own way of summing. An element in the wrong place is off
/// by whole products (about 0.25 each here), and an unwritten one is NaN (poisoned).
constexpr double kRelTol = 1e-5;

template <class T>
T round_to(float x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(x);
  else return __float2half_rn(x);
}
template <class T>
float as_float(T x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(x);
  else return __half2float(x);
}
template <class T>
uint16_t bits_of(T x) {
  uint16_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}
/// n uniform values in [−1, 1), rounded to T.
template <class T>
std::vector<T> random_elements(size_t n, uint64_t seed) {
  std::vector<T> out;
  for (float x : ft::random_uniform(n, seed)) out.push_back(round_to<T>(x));
  return out;
}

/// Expects got[m·n_cols + n] == Σ_k a(m, k)·b(k, n) within kRelTol of Σ|a·b|, every element.
template <class A, class B>
void expect_product(const std::vector<float>& got, int m_rows, int n_cols, int k_len, A a, B b,
                    const char* what) {
  for (int m = 0; m < m_rows; ++m)
    for (int n = 0; n < n_cols; ++n) {
      double sum = 0, magnitude = 0;
      for (int k = 0; k < k_len; ++k) {
        const double p = double(a(m, k)) * double(b(k, n));
        sum += p, magnitude += std::fabs(p);
      }
      ASSERT_NEAR(got[size_t(m) * n_cols + n], sum, kRelTol * magnitude) << what << " (" << m << ", " << n << ")";
    }
}

}  // namespace ft::tc_test
