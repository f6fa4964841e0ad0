// GPU tests of chapter 10: every variant, bf16 and fp16, d = 64 and 128, causal and not, on
// the ragged sizes (N = 1, 17, 64, 1000, 2048) against the float64 reference of the rounded
// inputs under the same-precision rule (outputs poisoned first, P recomputed from the saved
// lse); two lengths with both causal alignments and grouped heads (ft::testing::kv_shapes:
// dK and dV summed over the query heads that share a key/value head); large scores; and the
// refusals. Every GPU test skips without a GPU, and says why on a GPU that is not an H100/H200.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "10_hopper_backward/hopper_backward.hpp"
#include "core/check.cuh"
#include "harness/testing.hpp"

namespace {

using ft::testing::PSource;
using ft::testing::Shape;
using Case = ft::testing::BackwardCase;
using Group = ft::testing::ShapeGroup<ft::BackwardImpl>;

/// Skips unless a GPU is here and it is a Hopper (the kernels are sm_90a machine code).
#define REQUIRE_HOPPER() FT_REQUIRE_CC(9, 9, "chapter 10 needs Hopper (sm_90)")

std::vector<Case> standard_cases() {
  std::vector<Case> cases;
  for (const auto& impl : ch10::backward_impls())
    for (ft::DType t : impl.dtypes)
      for (const auto& shape : ft::testing::standard_shapes(impl.head_dims, t)) cases.push_back({impl, shape, t});
  return cases;
}

class Ch10Standard : public ::testing::TestWithParam<Case> {};
TEST_P(Ch10Standard, MatchesReference) {
  REQUIRE_HOPPER();
  ft::testing::expect_backward_correct(GetParam().impl, GetParam().problem(), ft::InputKind::Uniform,
                                       ft::testing::kDtypeTolerance, PSource::kFromLse);
}
INSTANTIATE_TEST_SUITE_P(AllVariants, Ch10Standard,
                         ::testing::ValuesIn(ft::testing::cases_by_size(standard_cases(), false)),
                         &ft::testing::case_name<ft::BackwardImpl>);

// Two lengths (both causal alignments) and grouped heads, every variant, one test per dtype.
std::vector<Group> kv_groups() {
  std::vector<Group> groups;
  for (const auto& impl : ch10::backward_impls())
    for (ft::DType t : impl.dtypes) groups.push_back({impl, t, ft::testing::kv_shapes(impl.head_dims, t)});
  return groups;
}
class Ch10KeyValue : public ::testing::TestWithParam<Group> {};
TEST_P(Ch10KeyValue, TwoLengthsAndGroupedHeadsMatchReference) {
  REQUIRE_HOPPER();
  ft::testing::check_each_shape(GetParam(), [](const Case& c) {
    ft::testing::expect_backward_correct(c.impl, c.problem(), ft::InputKind::Uniform, ft::testing::kDtypeTolerance,
                                         PSource::kFromLse);
  });
}
INSTANTIATE_TEST_SUITE_P(AllVariants, Ch10KeyValue, ::testing::ValuesIn(kv_groups()),
                         &ft::testing::group_name<ft::BackwardImpl>);

// Raw scores near ±1e4 (the saved lse keeps exp from overflowing), many heads; each step at
// the first head dim it computes (d = 64, but step 11's d = 128).
TEST(Ch10, LargeScoresManyHeads) {
  REQUIRE_HOPPER();
  for (const auto& impl : ch10::backward_impls())
    for (bool causal : {false, true}) {
      SCOPED_TRACE(impl.variant);
      const int d = impl.head_dims.front();
      ft::testing::expect_backward_correct(impl, Shape{1000, d, causal, ft::DType::BFloat16}.problem(),
                                           ft::InputKind::LargeScores, ft::testing::kDtypeTolerance,
                                           PSource::kFromLse);
    }
}

// Views (strides.hpp): the steps that copy with the copy engine (steps 2 to 8, and
// fastest) read q, k, v, o, do where their strides say and write dQ, dK, dV there, on the
// ragged sizes, causal and not, grouped heads; the inputs' gaps hold NaN (a read there fails
// the check) and the outputs' gaps must keep their poison.
void expect_views_correct(const ft::BackwardImpl& impl, ft::testing::ViewKind kind) {
  auto check = [&](const Shape& shape) {
    const ft::Problem p = shape.problem();
    const ft::Layout layout = ft::testing::test_layout(p, kind);
    SCOPED_TRACE(impl.variant + " on " + ft::testing::view_name(kind) + " views, " + p.describe());
    ft::testing::expect_backward_correct(impl, p, ft::InputKind::Uniform, ft::testing::kDtypeTolerance,
                                         PSource::kFromLse, &layout);
  };
  for (ft::DType t : {ft::DType::BFloat16, ft::DType::Float16})
    for (int d : impl.head_dims)
      for (bool causal : {false, true}) {
        for (int n : {1, 17, 1000}) {
          if (t == ft::DType::Float16 && n != 1000) continue;  // fp16: the same code, one size
          check(Shape{n, d, causal, t});
        }
        // Multi-query heads over two lengths, both alignments: dK and dV's strides are the
        // key/value heads', not the query heads'.
        if (t == ft::DType::BFloat16)
          for (auto align : {ft::CausalAlign::TopLeft, ft::CausalAlign::BottomRight})
            check(Shape{1000, d, causal, t, /*len_kv=*/700, /*heads_kv=*/1, align});
      }
}

TEST(Ch10Views, ProjectionAndPaddedViews) {
  REQUIRE_HOPPER();
  for (const auto& impl : ch10::backward_impls())
    if (impl.strided)
      for (auto kind : {ft::testing::ViewKind::kProjection, ft::testing::ViewKind::kPadded})
        expect_views_correct(impl, kind);
}

// Step 1 refuses a layout; every step refuses one whose rows are not 16-byte aligned or whose
// outputs overlap, before any launch (no GPU needed).
TEST(Ch10Views, RefusedWhereTheyCannotBeRead) {
  const ft::Problem p = ft::make_problem(2, 3, 64, 64, false, ft::DType::BFloat16);
  const ft::Layout views = ft::testing::test_layout(p, ft::testing::ViewKind::kProjection);
  ft::BackwardArgs a{};
  a.layout = &views;
  for (const auto& impl : ch10::backward_impls()) {
    EXPECT_EQ(impl.strided, impl.variant != "wgmma") << impl.variant;
    if (!impl.strided) EXPECT_THROW(impl.run(p, a, nullptr), ft::Unsupported) << impl.variant;
  }
  ft::Layout odd = views;
  odd.dO.head += 4;  // 8 bytes: rows no longer 16-byte aligned
  a.layout = &odd;
  EXPECT_THROW(ch10::fastest().run(p, a, nullptr), ft::Unsupported);
  ft::Layout overlapping = views;
  overlapping.dK.row = 8;  // tokens 8 elements apart, rows of 64: written twice
  a.layout = &overlapping;
  EXPECT_THROW(ch10::fastest().run(p, a, nullptr), ft::Unsupported);
}

// Step 4 (`deterministic`): three runs on the same inputs give dQ, dK and dV bit for bit the
// same, where the atomics and bulk_dq's unordered adds may not (their order varies with the
// blocks' timing); causal and not, a length that cuts the last tiles, grouped heads.
TEST(Ch10Deterministic, SameBitsEveryRun) {
  REQUIRE_HOPPER();
  const auto impls = ch10::backward_impls();
  const auto it = std::find_if(impls.begin(), impls.end(), [](const ft::BackwardImpl& i) { return i.variant == "deterministic"; });
  ASSERT_NE(it, impls.end());
  // The second problem has more blocks than any Hopper has SMs (32 key tiles × 32 heads):
  // the blocks that wait for their turn are then not all resident at once.
  for (bool causal : {false, true})
    for (int d : {64, 128}) {
      const ft::Problem p = ft::with_kv(ft::make_problem(2, 4, 1000, d, causal, ft::DType::BFloat16), 1000, 2,
                                        ft::CausalAlign::TopLeft);
      const ft::Problem many = ft::make_problem(4, 8, 4096, d, causal, ft::DType::BFloat16);
      for (const ft::Problem& q : {p, many}) {
        SCOPED_TRACE(q.describe());
        const ft::AttentionInputs in = ft::make_inputs(q, ft::InputKind::Uniform, 7);
        const ft::testing::BackwardOutputs first = ft::testing::run_backward(*it, q, in);
        for (int run = 0; run < 2; ++run) {
          const ft::testing::BackwardOutputs again = ft::testing::run_backward(*it, q, in);
          EXPECT_EQ(again.dQ, first.dQ);
          EXPECT_EQ(again.dK, first.dK);
          EXPECT_EQ(again.dV, first.dV);
        }
      }
    }
}

// Steps 9 to 11 (`persistent`, `tile_dq`, `dq_turns`): more key blocks than any Hopper has SMs, so that blocks walk
// several, against the float64 reference: causal and not; an odd number of query tiles a key
// block, so that items start on either stage and dQ buffer; grouped heads over a longer
// cache with the causal diagonal top-left, where the last key blocks see no query (items
// with no tile, whose dK and dV are zero); and ragged lengths, where the items' first and
// last tiles are masked.
TEST(Ch10Persistent, EveryBlockWalksSeveralKeyBlocks) {
  REQUIRE_HOPPER();
  const auto impls = ch10::backward_impls();
  for (const char* variant : {"persistent", "tile_dq", "dq_turns"}) {  // steps 9 to 11
    SCOPED_TRACE(variant);
    const auto it = std::find_if(impls.begin(), impls.end(), [&](const ft::BackwardImpl& i) { return i.variant == variant; });
    ASSERT_NE(it, impls.end());
    for (int d : it->head_dims)  // step 11: d = 128 only
      for (bool causal : {false, true}) {
        // 16 key tiles × 32 heads = 512 items; 3 × 128 = 384 of 5 query tiles (d = 128) or 3
        // (d = 64) each; 8 × 32 = 256 with 4 query heads a key/value head; 9 × 24 = 216 over
        // ragged lengths.
        const ft::Problem problems[] = {
            ft::make_problem(4, 8, 2048, d, causal, ft::DType::BFloat16),
            ft::make_problem(8, 16, 320, d, causal, ft::DType::BFloat16),
            ft::with_kv(ft::make_problem(8, 16, 300, d, causal, ft::DType::BFloat16), 1000, 4, ft::CausalAlign::TopLeft),
            ft::with_kv(ft::make_problem(3, 8, 1000, d, causal, ft::DType::BFloat16), 1100, 8,
                        ft::CausalAlign::BottomRight)};
        for (const ft::Problem& q : problems) {
          SCOPED_TRACE(q.describe());
          ft::testing::expect_backward_correct(*it, q, ft::InputKind::Uniform, ft::testing::kDtypeTolerance,
                                               PSource::kFromLse);
        }
      }
  }
}

// Refused before any launch (no GPU needed): float32, other head dims.
TEST(Ch10, RefusesWhatItDoesNotCompute) {
  for (const auto& impl : ch10::backward_impls()) {
    // Step 5 (overlap) holds two tiles' scores, step 6 (tall, tall_bulk) a 128-query tile's,
    // at d = 64 only; step 11 (dq_turns) a whole tile's dQ a consumer at d = 128 only; every
    // other step takes both.
    const bool d64_only = impl.variant == "overlap" || impl.variant == "tall" || impl.variant == "tall_bulk";
    const bool d128_only = impl.variant == "dq_turns";
    const std::vector<int> dims = d64_only    ? std::vector<int>{64}
                                  : d128_only ? std::vector<int>{128}
                                              : std::vector<int>{64, 128};
    EXPECT_EQ(impl.head_dims, dims) << impl.variant;
    EXPECT_EQ(impl.min_sm, 90) << impl.variant;
    ft::Problem p = ft::make_problem(1, 1, 16, 64, false, ft::DType::Float32);
    EXPECT_THROW(ft::check_supported(impl, p), ft::Unsupported) << impl.variant;
    p = ft::make_problem(1, 1, 16, 96, false, ft::DType::BFloat16);
    EXPECT_THROW(ft::check_supported(impl, p), ft::Unsupported) << impl.variant;
  }
}

}  // namespace
