// GPU tests of chapter 06: both variants, in bf16 and fp16, on ragged sizes (N = 1, 17, 64,
// 1000, 2048), d = 64 and 128, causal and not, B·H = 6, against the float64 reference of
// the rounded inputs under the same-precision rule (common/testing.hpp), with every output
// poisoned first; large scores; many heads and a custom scale; what storing S in the dtype
// costs; and the refusals (float32, other head dims), which need no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "06_tensor_cores/tensor_cores.hpp"
#include "check.cuh"
#include "inputs.hpp"
#include "reference.hpp"
#include "testing.hpp"

namespace {

using ft::testing::Shape;

using Case = ft::testing::ForwardCase;
constexpr auto case_name = &ft::testing::case_name<ft::ForwardImpl>;

std::vector<Case> standard_cases() {
  std::vector<Case> cases;
  for (const auto& impl : ch06::forward_impls())
    for (ft::DType t : impl.dtypes)
      for (const auto& shape : ft::testing::standard_shapes(impl.head_dims))
        cases.push_back({impl, shape, t});
  return cases;
}

class Ch06Standard : public ::testing::TestWithParam<Case> {};

TEST_P(Ch06Standard, MatchesReference) {
  FT_REQUIRE_GPU();
  ft::testing::expect_forward_correct(GetParam().impl, GetParam().problem());
}

INSTANTIATE_TEST_SUITE_P(AllVariants, Ch06Standard, ::testing::ValuesIn(standard_cases()),
                         case_name);

// Raw scores near ±1e4 (scaled: about ±1250): exp of them overflows unless the row max is
// subtracted first. grid_f32 keeps those scores to 24 bits and must meet the rule; grid_half
// rounds them to 8 (bf16) or 11 (fp16) bits first, which the next test measures instead.
std::vector<Case> large_score_cases() {
  std::vector<Case> cases;
  for (ft::DType t : ch06::grid_f32().dtypes)
    for (int n : {17, 1000})
      for (int d : {64, 128})
        for (bool causal : {false, true}) cases.push_back({ch06::grid_f32(), Shape{n, d, causal}, t});
  return cases;
}

class Ch06LargeScores : public ::testing::TestWithParam<Case> {};

TEST_P(Ch06LargeScores, NoOverflow) {
  FT_REQUIRE_GPU();
  ft::testing::expect_forward_correct(GetParam().impl, GetParam().problem(),
                                      ft::InputKind::LargeScores);
}

INSTANTIATE_TEST_SUITE_P(GridF32, Ch06LargeScores, ::testing::ValuesIn(large_score_cases()),
                         case_name);

/// Relative L2 error of `got` against the float64 `ref`; NaN if anything is not finite.
double rel_l2(const std::vector<float>& got, const std::vector<double>& ref) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return NAN;
    err += (got[i] - ref[i]) * (got[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  return std::sqrt(err / norm);
}

// What S in the dtype costs, measured where it shows most: scores of about ±1250, where one
// bf16 step is 8 (fp16: 1) and lands in the exponent. The log-sum-exp, which is about the
// row's largest score, carries that rounding directly: grid_half's lse must be finite and
// clearly worse than grid_f32's (float32 S: steps of about 1e-4 at these magnitudes).
TEST(Ch06, StoringScoresInTheDtypeCostsDigits) {
  FT_REQUIRE_GPU();
  for (ft::DType t : {ft::DType::BFloat16, ft::DType::Float16}) {
    for (bool causal : {false, true}) {
      const ft::Problem p = ft::make_problem(1, 2, 1000, 64, causal, t);
      SCOPED_TRACE(p.describe());
      const ft::AttentionInputs in = ft::make_inputs(p, ft::InputKind::LargeScores, 7);
      std::vector<double> O(size_t(p.elems())), lse(size_t(p.rows()));
      ft::reference_forward(p, in.Q.data(), in.K.data(), in.V.data(), O.data(), lse.data());
      const auto f32 = ft::testing::run_forward(ch06::grid_f32(), p, in);
      const auto half = ft::testing::run_forward(ch06::grid_half(), p, in);
      const double e32 = rel_l2(f32.lse, lse), e16 = rel_l2(half.lse, lse);
      std::printf("  %s: lse relative L2 error, S float32 %.2e, S %s %.2e; O %.2e vs %.2e\n",
                  p.describe().c_str(), e32, ft::dtype_name(t), e16, rel_l2(f32.O, O),
                  rel_l2(half.O, O));
      EXPECT_TRUE(std::isfinite(e16)) << "grid_half overflowed";
      EXPECT_GT(e16, 10 * e32) << "the rounding of S should show in the lse";
    }
  }
}

// B·H = 70 000 heads (past grid.y's 65 535: every kernel flattens heads into grid.x), and a
// scale other than 1/sqrt(d).
TEST(Ch06, ManyHeadsAndCustomScale) {
  FT_REQUIRE_GPU();
  ft::Problem p = ft::make_problem(700, 100, 5, 64, true, ft::DType::BFloat16);
  for (const auto& impl : ch06::forward_impls()) {
    SCOPED_TRACE(impl.variant);
    ft::testing::expect_forward_correct(impl, p);
  }
  p = ft::make_problem(1, 2, 300, 128, false, ft::DType::Float16);
  p.scale = 0.05f;
  for (const auto& impl : ch06::forward_impls()) {
    SCOPED_TRACE(impl.variant);
    ft::testing::expect_forward_correct(impl, p);
  }
}

// float32 and other head dims are refused before any launch (no GPU needed).
TEST(Ch06, RefusesFloat32AndOtherHeadDims) {
  for (const auto& impl : ch06::forward_impls()) {
    EXPECT_EQ(impl.head_dims, (std::vector<int>{64, 128})) << impl.variant;
    EXPECT_EQ(impl.min_sm, 80) << impl.variant;
    ft::Problem p = ft::make_problem(1, 1, 16, 64, false, ft::DType::Float32);
    EXPECT_THROW(ft::check_supported(impl, p), ft::Unsupported) << impl.variant;
    EXPECT_THROW(impl.run(p, ft::ForwardArgs{}, nullptr), ft::Unsupported) << impl.variant;
    p.dtype = ft::DType::BFloat16;
    p.head_dim = 32;
    EXPECT_THROW(ft::check_supported(impl, p), ft::Unsupported) << impl.variant;
  }
}

}  // namespace
