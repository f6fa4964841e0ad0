// GPU tests of chapter 08: every variant, in bf16 and fp16, on the ragged standard sizes
// (N = 1, 17, 64, 1000, 2048), d = 64 and 128, causal and not, B·H = 6, against the float64
// reference of the rounded inputs under the same-precision rule (common/testing.hpp), P
// recomputed from the saved lse (PSource::kFromLse), every output poisoned first; plus large
// scores and many heads. Without a GPU they skip; the refusals run anywhere.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "08_tensor_core_backward/tensor_core_backward.hpp"
#include "check.cuh"
#include "testing.hpp"

namespace {

using ft::testing::PSource;
using ft::testing::Shape;

/// One implementation on one shape in one dtype (testing.hpp's ForwardCase, for a backward).
struct Case {
  ft::BackwardImpl impl;
  Shape shape;
  ft::DType dtype;
  ft::Problem problem() const {
    ft::Problem p = shape.problem();
    p.dtype = dtype;
    return p;
  }
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.impl.variant << ' ' << ft::dtype_name(c.dtype) << ' ';
  ft::testing::PrintTo(c.shape, os);
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return info.param.impl.variant + "_" + ft::testing::shape_name(info.param.shape);  // has dtype
}

std::vector<Case> standard_cases() {
  std::vector<Case> cases;
  for (const auto& impl : ch08::backward_impls())
    for (ft::DType t : impl.dtypes)
      for (const auto& shape : ft::testing::standard_shapes(impl.head_dims, t))
        cases.push_back({impl, shape, t});
  return cases;
}

class Ch08Standard : public ::testing::TestWithParam<Case> {};

TEST_P(Ch08Standard, MatchesReference) {
  FT_REQUIRE_GPU();
  ft::testing::expect_backward_correct(GetParam().impl, GetParam().problem(),
                                       ft::InputKind::Uniform, ft::testing::kDtypeTolerance,
                                       PSource::kFromLse);
}

INSTANTIATE_TEST_SUITE_P(AllVariants, Ch08Standard, ::testing::ValuesIn(standard_cases()),
                         case_name);

// Raw scores near ±1e4: P = exp(S·scale − L) overflows unless the saved lse is subtracted
// inside the exponent (and a masked entry's exp, which may be Inf, must be replaced, not
// multiplied by 0).
std::vector<Case> large_score_cases() {
  std::vector<Case> cases;
  for (const auto& impl : ch08::backward_impls())
    for (ft::DType t : impl.dtypes)
      for (int n : {17, 1000})
        for (bool causal : {false, true}) cases.push_back({impl, Shape{n, 64, causal, t}, t});
  return cases;
}

class Ch08LargeScores : public ::testing::TestWithParam<Case> {};

TEST_P(Ch08LargeScores, NoOverflow) {
  FT_REQUIRE_GPU();
  ft::testing::expect_backward_correct(GetParam().impl, GetParam().problem(),
                                       ft::InputKind::LargeScores, ft::testing::kDtypeTolerance,
                                       PSource::kFromLse);
}

INSTANTIATE_TEST_SUITE_P(AllVariants, Ch08LargeScores, ::testing::ValuesIn(large_score_cases()),
                         case_name);

// B·H = 70 000 heads on grid.x (past grid.y's 65 535), and a scale other than 1/sqrt(d).
TEST(Ch08, ManyHeadsAndCustomScale) {
  FT_REQUIRE_GPU();
  ft::Problem p = ft::make_problem(700, 100, 5, 64, true, ft::DType::BFloat16);
  ft::testing::expect_backward_correct(ch08::plain(), p, ft::InputKind::Uniform,
                                       ft::testing::kDtypeTolerance, PSource::kFromLse);
  p = ft::make_problem(1, 2, 300, 128, false, ft::DType::Float16);
  p.scale = 0.05f;
  for (const auto& impl : ch08::backward_impls()) {
    SCOPED_TRACE(impl.variant);
    ft::testing::expect_backward_correct(impl, p, ft::InputKind::Uniform,
                                         ft::testing::kDtypeTolerance, PSource::kFromLse);
  }
}

// float32 and other head dims are refused before any launch (no GPU needed).
TEST(Ch08, RefusesFloat32AndOtherHeadDims) {
  for (const auto& impl : ch08::backward_impls()) {
    EXPECT_EQ(impl.head_dims, (std::vector<int>{64, 128})) << impl.variant;
    EXPECT_EQ(impl.min_sm, 80) << impl.variant;
    ft::Problem p = ft::make_problem(1, 1, 16, 32, false, ft::DType::Float32);
    EXPECT_THROW(ft::check_supported(impl, p), ft::Unsupported) << impl.variant;
    EXPECT_THROW(impl.run(p, ft::BackwardArgs{}, nullptr), ft::Unsupported) << impl.variant;
    p.dtype = ft::DType::BFloat16;  // bf16 but d = 32
    EXPECT_THROW(ft::check_supported(impl, p), ft::Unsupported) << impl.variant;
    EXPECT_THROW(impl.run(p, ft::BackwardArgs{}, nullptr), ft::Unsupported) << impl.variant;
  }
}

}  // namespace
