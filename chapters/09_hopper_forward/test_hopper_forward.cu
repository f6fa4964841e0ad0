// GPU tests of chapter 09: every variant, bf16 and fp16, d = 64 and 128, causal and not, on
// the ragged sizes (N = 1, 17, 64, 1000, 2048) and one of 4096, against the float64
// reference of the rounded inputs under the same-precision rule (outputs poisoned first);
// two lengths and grouped heads (both causal alignments, rows that see no key, multi-query);
// views; large scores; and the refusals (float32, other head dims, a GPU other than Hopper).
// Every GPU test skips without a GPU, and says why on a GPU that is not an H100/H200.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "09_hopper_forward/hopper_forward.hpp"
#include "core/check.cuh"
#include "harness/testing.hpp"

namespace {

using ft::testing::Shape;
using Case = ft::testing::ForwardCase;
using Group = ft::testing::ShapeGroup<ft::ForwardImpl>;

/// Skips unless a GPU is here and it is a Hopper (the kernels are sm_90a machine code).
#define REQUIRE_HOPPER() FT_REQUIRE_CC(9, 9, "chapter 09 needs Hopper (sm_90)")

std::vector<Case> standard_cases() {
  std::vector<Case> cases;
  for (const auto& impl : ch09::forward_impls())
    for (ft::DType t : impl.dtypes) {
      for (const auto& shape : ft::testing::standard_shapes(impl.head_dims)) cases.push_back({impl, shape, t});
      if (t == ft::DType::BFloat16)
        for (int d : impl.head_dims)
          for (bool causal : {false, true}) cases.push_back({impl, Shape{4096, d, causal}, t});
    }
  return cases;
}

class Ch09Standard : public ::testing::TestWithParam<Case> {};
TEST_P(Ch09Standard, MatchesReference) {
  REQUIRE_HOPPER();
  ft::testing::expect_forward_correct(GetParam().impl, GetParam().problem());
}
INSTANTIATE_TEST_SUITE_P(AllVariants, Ch09Standard,
                         ::testing::ValuesIn(ft::testing::cases_by_size(standard_cases(), false)),
                         &ft::testing::case_name<ft::ForwardImpl>);

class Ch09SmallShapes : public ::testing::TestWithParam<Group> {};
TEST_P(Ch09SmallShapes, MatchReference) {
  REQUIRE_HOPPER();
  ft::testing::check_each_shape(GetParam(), [](const Case& c) {
    ft::testing::expect_forward_correct(c.impl, c.problem());
  });
}
INSTANTIATE_TEST_SUITE_P(AllVariants, Ch09SmallShapes,
                         ::testing::ValuesIn(ft::testing::small_shape_groups(standard_cases())),
                         &ft::testing::group_name<ft::ForwardImpl>);

// Two lengths and grouped heads (ft::testing::kv_shapes), every variant, one test per dtype.
std::vector<Group> kv_groups() {
  std::vector<Group> groups;
  for (const auto& impl : ch09::forward_impls())
    for (ft::DType t : impl.dtypes) groups.push_back({impl, t, ft::testing::kv_shapes(impl.head_dims, t)});
  return groups;
}
class Ch09KeyValue : public ::testing::TestWithParam<Group> {};
TEST_P(Ch09KeyValue, TwoLengthsAndGroupedHeadsMatchReference) {
  REQUIRE_HOPPER();
  ft::testing::check_each_shape(GetParam(), [](const Case& c) {
    ft::testing::expect_forward_correct(c.impl, c.problem());
  });
}
INSTANTIATE_TEST_SUITE_P(AllVariants, Ch09KeyValue, ::testing::ValuesIn(kv_groups()),
                         &ft::testing::group_name<ft::ForwardImpl>);

// Views: q, k, v read where their strides say, O written there; grouped heads with views.
TEST(Ch09Views, ProjectionAndPaddedViews) {
  REQUIRE_HOPPER();
  for (const auto& impl : ch09::forward_impls())
    for (auto kind : {ft::testing::ViewKind::kProjection, ft::testing::ViewKind::kPadded})
      for (int n : {17, 1000})
        for (int d : impl.head_dims)
          for (bool causal : {false, true}) {
            const ft::Problem p = Shape{n, d, causal, ft::DType::BFloat16}.problem();
            const ft::Layout layout = ft::testing::test_layout(p, kind);
            SCOPED_TRACE(impl.variant + ", " + ft::testing::view_name(kind) + " views, " + p.describe());
            ft::testing::expect_forward_correct(impl, p, ft::InputKind::Uniform,
                                                ft::testing::kDtypeTolerance, &layout);
          }
  const ft::Problem g = ft::with_kv(ft::make_problem(2, 8, 16, 128, true, ft::DType::Float16), 3000, 2,
                                    ft::CausalAlign::BottomRight);
  const ft::Layout layout = ft::testing::test_layout(g, ft::testing::ViewKind::kProjection);
  ft::testing::expect_forward_correct(ch09::fastest(), g, ft::InputKind::Uniform,
                                      ft::testing::kDtypeTolerance, &layout);
}

// Raw scores near ±1e4 (the running max keeps exp from overflowing), many heads, a scale.
TEST(Ch09, LargeScoresManyHeadsCustomScale) {
  REQUIRE_HOPPER();
  for (const auto& impl : ch09::forward_impls())
    for (bool causal : {false, true}) {
      SCOPED_TRACE(impl.variant);
      ft::testing::expect_forward_correct(impl, Shape{1000, 64, causal, ft::DType::BFloat16}.problem(),
                                          ft::InputKind::LargeScores);
    }
  ft::testing::expect_forward_correct(ch09::fastest(), ft::make_problem(700, 100, 5, 64, true, ft::DType::BFloat16));
  ft::Problem p = ft::make_problem(1, 2, 300, 128, false, ft::DType::Float16);
  p.scale = 0.05f;
  ft::testing::expect_forward_correct(ch09::fastest(), p);
}

// More query tiles than the H200 has SMs (2·12 heads × 8 tiles of 128 rows, or 6 of 192):
// the persistent variants' blocks each walk two tiles or more, so the stage ring and Q's
// barriers carry across tiles of different K/V counts (causal, keys longer than queries).
TEST(Ch09, PersistentBlocksWalkSeveralTiles) {
  REQUIRE_HOPPER();
  for (const auto& impl : ch09::forward_impls()) {
    if (impl.variant.find("persistent") == std::string::npos && impl.variant != "fastest") continue;
    for (int d : impl.head_dims)
      for (bool causal : {false, true}) {
        const ft::Problem p = ft::with_kv(ft::make_problem(2, 12, 1000, d, causal, ft::DType::BFloat16), 1300, 4,
                                          ft::CausalAlign::BottomRight);
        SCOPED_TRACE(impl.variant + ", " + p.describe());
        ft::testing::expect_forward_correct(impl, p);
      }
  }
}

// Refused before any launch (no GPU needed): float32, other head dims, a non-positive scale.
TEST(Ch09, RefusesWhatItDoesNotCompute) {
  for (const auto& impl : ch09::forward_impls()) {
    // d = 64 and 128, or (the three-consumer variant, which the registers allow only there) 64.
    EXPECT_TRUE(impl.head_dims == (std::vector<int>{64, 128}) || impl.head_dims == (std::vector<int>{64}))
        << impl.variant;
    EXPECT_EQ(impl.min_sm, 90) << impl.variant;
    ft::Problem p = ft::make_problem(1, 1, 16, 64, false, ft::DType::Float32);
    EXPECT_THROW(ft::check_supported(impl, p), ft::Unsupported) << impl.variant;
    EXPECT_THROW(impl.run(p, ft::ForwardArgs{}, nullptr), ft::Unsupported) << impl.variant;
    p.dtype = ft::DType::BFloat16;
    p.head_dim = 96;
    EXPECT_THROW(ft::check_supported(impl, p), ft::Unsupported) << impl.variant;
    p.head_dim = 64;
    p.scale = -1.f;
    EXPECT_THROW(impl.run(p, ft::ForwardArgs{}, nullptr), ft::Unsupported) << impl.variant;
  }
}

// On a GPU that is not a Hopper, the launch refuses with the architecture in the message.
TEST(Ch09, OtherGpusAreToldItNeedsHopper) {
  FT_REQUIRE_GPU();
  int major = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  if (major == 9) GTEST_SKIP() << "this GPU is a Hopper: the refusal is for the others";
  try {
    ft::testing::expect_forward_correct(ch09::fastest(), Shape{64, 64, false, ft::DType::BFloat16}.problem());
    FAIL() << "ran on sm_" << major << "x";
  } catch (const ft::DeviceTooSmall& e) {
    EXPECT_NE(std::string(e.what()).find("needs Hopper (sm_90)"), std::string::npos) << e.what();
  }
}

}  // namespace
