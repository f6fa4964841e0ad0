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

#include <cuda_bf16.h>

#include "10_hopper_backward/backward_traits.cuh"
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

// Raw scores near ±1e4 (the saved lse keeps exp from overflowing), many heads.
TEST(Ch10, LargeScoresManyHeads) {
  REQUIRE_HOPPER();
  for (const auto& impl : ch10::backward_impls())
    for (bool causal : {false, true}) {
      SCOPED_TRACE(impl.variant);
      ft::testing::expect_backward_correct(impl, Shape{1000, 64, causal, ft::DType::BFloat16}.problem(),
                                           ft::InputKind::LargeScores, ft::testing::kDtypeTolerance,
                                           PSource::kFromLse);
    }
}

// Views (strides.hpp): the steps that copy with the copy engine (steps 2 to 7, and
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
// The tiles' layouts (no GPU needed): the two consumers' dQ shares, as their accumulator
// registers map to a tile's rows and columns, cover the tile's Br × d once (by columns at
// Br = 64, by rows at Br = 128), and their dSᵀ stores cover the 128 keys × Br queries once;
// at Br = 128 each consumer's dQ rows are the queries of the dSᵀ panel it reads.
template <class Tr>
void expect_shares_cover_the_tile() {
  using ft::sm90::acc_col;
  using ft::sm90::acc_row;
  std::vector<int> dq(size_t(Tr::Br) * Tr::D, 0), ds(size_t(Tr::Bc) * Tr::Br, 0);
  for (int c = 0; c < Tr::kConsumers; ++c)
    for (int t = 0; t < ft::sm90::kWarpgroupThreads; ++t) {
      for (int i = 0; i < Tr::kDqCols / 2; ++i) {
        const int row = Tr::dq_row0(c) + acc_row(t, i), col = Tr::dq_col0(c) + acc_col(t, i);
        ASSERT_TRUE(row < Tr::Br && col < Tr::D) << "consumer " << c << " thread " << t << " register " << i;
        ++dq[size_t(row) * Tr::D + col];
        EXPECT_EQ(Tr::dq_row0(c) / ft::sm90::kPanelCols, row / ft::sm90::kPanelCols) << "dS panel of row " << row;
      }
      for (int i = 0; i < Tr::Br / 2; ++i) {  // store_ds: key 64c + acc_row, query acc_col
        const int key = c * ft::sm90::kMmaM + acc_row(t, i), query = acc_col(t, i);
        ASSERT_TRUE(key < Tr::Bc && query < Tr::Br);
        ++ds[size_t(key) * Tr::Br + query];
      }
    }
  EXPECT_EQ(std::count(dq.begin(), dq.end(), 1), std::ptrdiff_t(dq.size()));
  EXPECT_EQ(std::count(ds.begin(), ds.end(), 1), std::ptrdiff_t(ds.size()));
}
TEST(Ch10Layout, SharesCoverTheTileOnce) {
  using ch10::DqAdd;
  using ch10::SpecializedBackwardTraits;
  expect_shares_cover_the_tile<SpecializedBackwardTraits<__nv_bfloat16, 64, DqAdd::kAtomics>>();
  expect_shares_cover_the_tile<SpecializedBackwardTraits<__nv_bfloat16, 128, DqAdd::kBulk>>();
  expect_shares_cover_the_tile<
      SpecializedBackwardTraits<__nv_bfloat16, 64, DqAdd::kBulk, false, ch10::Schedule::kInOrder, 128>>();
}

// Refused before any launch (no GPU needed): float32, other head dims.
TEST(Ch10, RefusesWhatItDoesNotCompute) {
  for (const auto& impl : ch10::backward_impls()) {
    // Step 5 (overlap) holds two tiles' scores, step 6 (tall, tall_bulk) a 128-query tile's,
    // at d = 64 only; every other step takes both.
    const bool d64_only = impl.variant == "overlap" || impl.variant == "tall" || impl.variant == "tall_bulk";
    const std::vector<int> dims = d64_only ? std::vector<int>{64} : std::vector<int>{64, 128};
    EXPECT_EQ(impl.head_dims, dims) << impl.variant;
    EXPECT_EQ(impl.min_sm, 90) << impl.variant;
    ft::Problem p = ft::make_problem(1, 1, 16, 64, false, ft::DType::Float32);
    EXPECT_THROW(ft::check_supported(impl, p), ft::Unsupported) << impl.variant;
    p = ft::make_problem(1, 1, 16, 96, false, ft::DType::BFloat16);
    EXPECT_THROW(ft::check_supported(impl, p), ft::Unsupported) << impl.variant;
  }
}

}  // namespace
