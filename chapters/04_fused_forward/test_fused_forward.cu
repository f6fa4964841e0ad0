// GPU tests of chapter 04: every variant (simple, fast and each registered tile shape) on
// the standard shapes against the float64 reference, with outputs poisoned by the harness,
// plus overflow bait (LargeScores), small causal cases, many heads and a custom scale.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "04_fused_forward/fused_forward.hpp"
#include "core/check.cuh"
#include "harness/testing.hpp"

namespace {

using ft::testing::Shape;

struct Case {
  ft::ForwardImpl impl;
  Shape shape;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return info.param.impl.variant + "_" + ft::testing::shape_name(info.param.shape);
}

std::vector<Case> standard_cases() {
  std::vector<Case> cases;
  for (const auto& impl : ch04::forward_impls())
    for (const auto& shape : ft::testing::standard_shapes(impl.head_dims)) cases.push_back({impl, shape});
  return cases;
}

class Ch04Standard : public ::testing::TestWithParam<Case> {};

TEST_P(Ch04Standard, MatchesReference) {
  FT_REQUIRE_GPU();
  ft::testing::expect_forward_correct(GetParam().impl, GetParam().shape.problem());
}

INSTANTIATE_TEST_SUITE_P(AllVariants, Ch04Standard, ::testing::ValuesIn(standard_cases()), case_name);

// Raw scores near ±1e4: exp of them overflows float32 unless the running max is subtracted.
// O and lse are also held to 2x the float32 unfused computation's error on the same inputs
// (testing.hpp), under the kLargeScoreTolerance cap.
std::vector<Case> large_score_cases() {
  std::vector<Case> cases;
  for (const auto& impl : ch04::forward_impls())
    for (int n : {17, 1000})
      for (bool causal : {false, true}) cases.push_back({impl, Shape{n, 64, causal}});
  return cases;
}

class Ch04LargeScores : public ::testing::TestWithParam<Case> {};

TEST_P(Ch04LargeScores, NoOverflow) {
  FT_REQUIRE_GPU();
  ft::testing::expect_forward_correct(GetParam().impl, GetParam().shape.problem(),
                                      ft::InputKind::LargeScores,
                                      ft::testing::kLargeScoreTolerance);
}

INSTANTIATE_TEST_SUITE_P(AllVariants, Ch04LargeScores, ::testing::ValuesIn(large_score_cases()),
                         case_name);

// Causal with one token, and with 17 (a partial tile that is also the diagonal tile: the
// mask and the bounds meet in one tile), for several batch/head counts and every d.
TEST(Ch04, CausalTinySequences) {
  FT_REQUIRE_GPU();
  for (const auto& impl : ch04::forward_impls())
    for (int n : {1, 17})
      for (int d : {32, 64, 128})
        for (int heads : {1, 5}) {
          ft::Problem p;
          p.batch = 3, p.heads_q = p.heads_kv = heads, p.len_q = p.len_kv = n, p.head_dim = d, p.causal = true;
          SCOPED_TRACE(impl.variant + " " + p.describe());
          ft::testing::expect_forward_correct(impl, p);
        }
}

// B·H = 70 000 heads: more than grid.y's 65 535, so the grid must not put heads there.
TEST(Ch04, MoreHeadsThanGridY) {
  FT_REQUIRE_GPU();
  ft::Problem p;
  p.batch = 700, p.heads_q = p.heads_kv = 100, p.len_q = p.len_kv = 5, p.head_dim = 32, p.causal = true;
  ft::testing::expect_forward_correct(ch04::simple(), p);
  ft::testing::expect_forward_correct(ch04::fast(), p);
}

// A softmax scale other than 1/sqrt(d) reaches the kernel.
TEST(Ch04, CustomScale) {
  FT_REQUIRE_GPU();
  ft::Problem p;
  p.batch = 1, p.heads_q = p.heads_kv = 2, p.len_q = p.len_kv = 300, p.head_dim = 64, p.scale = 0.5f;
  for (const auto& impl : ch04::forward_impls()) {
    SCOPED_TRACE(impl.variant);
    ft::testing::expect_forward_correct(impl, p);
  }
}

// The kernels exist for d = 32, 64, 128 only; anything else is refused before a launch.
// (No GPU needed: run() throws before touching the device.)
TEST(Ch04, RefusesOtherHeadDims) {
  ft::Problem p;
  p.len_q = p.len_kv = 16, p.head_dim = 48;
  for (const auto& impl : ch04::forward_impls()) {
    EXPECT_EQ(impl.head_dims, (std::vector<int>{32, 64, 128})) << impl.variant;
    EXPECT_THROW(impl.run(p, ft::ForwardArgs{}, nullptr), ft::Unsupported) << impl.variant;
  }
}

TEST(Ch04, NeedsNoWorkspace) {
  ft::Problem p;
  p.batch = 4, p.heads_q = p.heads_kv = 32, p.len_q = p.len_kv = 16384, p.head_dim = 128;
  for (const auto& impl : ch04::forward_impls()) EXPECT_EQ(impl.workspace_bytes(p), 0u) << impl.variant;
}

}  // namespace
