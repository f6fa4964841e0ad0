// GPU tests of chapter 01: the naive forward against the float64 reference on the standard
// shapes (ragged N, N = 1, causal and not, B·H = 6), and on overflow-bait inputs.
#include <gtest/gtest.h>

#include "01_naive/naive.hpp"
#include "harness/testing.hpp"

namespace {

using ft::testing::Shape;

class Ch01Forward : public ::testing::TestWithParam<Shape> {};

TEST_P(Ch01Forward, MatchesReference) {
  FT_REQUIRE_GPU();
  ft::testing::expect_forward_correct(ch01::naive(), GetParam().problem());
}

INSTANTIATE_TEST_SUITE_P(StandardShapes, Ch01Forward,
                         ::testing::ValuesIn(ft::testing::standard_shapes()),
                         [](const auto& info) { return ft::testing::shape_name(info.param); });

// Scores near ±1e4: exp overflows float32 unless the row maximum is subtracted first.
// O and lse are also held to 2x the float32 unfused computation's error on the same inputs
// (testing.hpp), under the kLargeScoreTolerance cap.
class Ch01LargeScores : public ::testing::TestWithParam<Shape> {};

TEST_P(Ch01LargeScores, StaysFiniteAndAccurate) {
  FT_REQUIRE_GPU();
  ft::testing::expect_forward_correct(ch01::naive(), GetParam().problem(),
                                      ft::InputKind::LargeScores,
                                      ft::testing::kLargeScoreTolerance);
}

INSTANTIATE_TEST_SUITE_P(Shapes, Ch01LargeScores,
                         ::testing::Values(Shape{17, 64, false}, Shape{17, 64, true},
                                           Shape{1000, 64, false}, Shape{1000, 64, true}),
                         [](const auto& info) { return ft::testing::shape_name(info.param); });

// Any head dimension from 1 to 1024 is accepted; an odd one and the largest, once each.
TEST(Ch01Forward, UnusualHeadDims) {
  FT_REQUIRE_GPU();
  for (int d : {1, 7, 1024}) {
    ft::Problem p = Shape{33, d, true}.problem();
    ft::testing::expect_forward_correct(ch01::naive(), p);
  }
}

}  // namespace
