// GPU tests of chapter 07: every variant, in bf16 and fp16, on ragged sizes (N = 1, 17, 64,
// 1000, 2048 and, for the staircase, 4096), d = 64 and 128, causal and not, B·H = 6,
// against the float64 reference of the rounded inputs under the same-precision rule
// (common/harness/testing.hpp: relative L2 ≤ 1e-2 and ≤ 2× the unfused bf16/fp16 computation),
// with every output poisoned first; plus large scores, many heads and a custom scale. The
// shapes below N = 1000 of a variant and dtype share one test (Ch07SmallShapes).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "07_tensor_core_forward/flash_forward.hpp"
#include "core/check.cuh"
#include "harness/testing.hpp"

namespace {

using ft::testing::Shape;

using Case = ft::testing::ForwardCase;
constexpr auto case_name = &ft::testing::case_name<ft::ForwardImpl>;

bool in_staircase(const std::string& v) {
  return v == "plain" || v == "padded" || v == "swizzled" || v == "async" || v == "tuned" ||
         v == "lazy_rescale";
}

std::vector<Case> standard_cases() {
  std::vector<Case> cases;
  for (const auto& impl : ch07::forward_impls())
    for (ft::DType t : impl.dtypes) {
      // The tile-shape sweep reuses the staircase's kernel template with other constants:
      // bf16 on the ragged sizes is enough to catch a shape that breaks it.
      const bool sweep = !in_staircase(impl.variant) && impl.variant != "fastest";
      if (sweep && t != ft::DType::BFloat16) continue;
      for (const auto& shape : ft::testing::standard_shapes(impl.head_dims))
        if (!sweep || shape.seq_len == 17 || shape.seq_len == 1000 || shape.seq_len == 2048)
          cases.push_back({impl, shape, t});
      // One size past two 2048-key halves of the L2 model, in bf16 (fp16 runs the same
      // code on the same tiles: the ragged sizes above cover it; these 4096-key cases were
      // a tenth of the test command's time on the H200).
      if (in_staircase(impl.variant) && t == ft::DType::BFloat16)
        for (int d : impl.head_dims)
          for (bool causal : {false, true}) cases.push_back({impl, Shape{4096, d, causal}, t});
    }
  return cases;
}

class Ch07Standard : public ::testing::TestWithParam<Case> {};

TEST_P(Ch07Standard, MatchesReference) {
  FT_REQUIRE_GPU();
  ft::testing::expect_forward_correct(GetParam().impl, GetParam().problem());
}

INSTANTIATE_TEST_SUITE_P(AllVariants, Ch07Standard,
                         ::testing::ValuesIn(ft::testing::cases_by_size(standard_cases(), false)),
                         case_name);

// The standard cases below N = 1000, one test per variant and dtype (ft::testing::ShapeGroup:
// a GPU test's process start is most of a small one's time).
class Ch07SmallShapes : public ::testing::TestWithParam<ft::testing::ShapeGroup<ft::ForwardImpl>> {};

TEST_P(Ch07SmallShapes, MatchReference) {
  FT_REQUIRE_GPU();
  ft::testing::check_each_shape(GetParam(), [](const Case& c) {
    ft::testing::expect_forward_correct(c.impl, c.problem());
  });
}

INSTANTIATE_TEST_SUITE_P(AllVariants, Ch07SmallShapes,
                         ::testing::ValuesIn(ft::testing::small_shape_groups(standard_cases())),
                         &ft::testing::group_name<ft::ForwardImpl>);

// Raw scores near ±1e4: exp of them overflows unless the running max is subtracted; in
// fp16 the inputs themselves are large (about 29), still far inside its range.
std::vector<Case> large_score_cases() {
  std::vector<Case> cases;
  for (const auto& impl : ch07::forward_impls())
    if (in_staircase(impl.variant))
      for (ft::DType t : impl.dtypes)
        for (int n : {17, 1000})
          for (bool causal : {false, true}) cases.push_back({impl, Shape{n, 64, causal}, t});
  return cases;
}

class Ch07LargeScores : public ::testing::TestWithParam<Case> {};

TEST_P(Ch07LargeScores, NoOverflow) {
  FT_REQUIRE_GPU();
  ft::testing::expect_forward_correct(GetParam().impl, GetParam().problem(),
                                      ft::InputKind::LargeScores);
}

INSTANTIATE_TEST_SUITE_P(Staircase, Ch07LargeScores, ::testing::ValuesIn(large_score_cases()),
                         case_name);

// B·H = 70 000 heads (past grid.y's 65 535), and a scale other than 1/sqrt(d).
TEST(Ch07, ManyHeadsAndCustomScale) {
  FT_REQUIRE_GPU();
  ft::Problem p = ft::make_problem(700, 100, 5, 64, true, ft::DType::BFloat16);
  ft::testing::expect_forward_correct(ch07::fastest(), p);
  p = ft::make_problem(1, 2, 300, 128, false, ft::DType::Float16);
  p.scale = 0.05f;
  for (const auto& impl : ch07::forward_impls()) {
    SCOPED_TRACE(impl.variant);
    ft::testing::expect_forward_correct(impl, p);
  }
}

// Two lengths and grouped heads (ft::testing::kv_shapes: a few queries over a long cache and
// the reverse, one query, both causal alignments, a bottom-right mask whose first rows see
// no key, multi-query heads): `fastest`'s KeyValue instantiations, one test per dtype.
std::vector<ft::testing::ShapeGroup<ft::ForwardImpl>> kv_groups() {
  std::vector<ft::testing::ShapeGroup<ft::ForwardImpl>> groups;
  for (ft::DType t : ch07::fastest().dtypes)
    groups.push_back({ch07::fastest(), t, ft::testing::kv_shapes(ch07::fastest().head_dims, t)});
  return groups;
}

class Ch07KeyValue : public ::testing::TestWithParam<ft::testing::ShapeGroup<ft::ForwardImpl>> {};

TEST_P(Ch07KeyValue, TwoLengthsAndGroupedHeadsMatchReference) {
  FT_REQUIRE_GPU();
  ft::testing::check_each_shape(GetParam(), [](const Case& c) {
    ft::testing::expect_forward_correct(c.impl, c.problem());
  });
}

INSTANTIATE_TEST_SUITE_P(Fastest, Ch07KeyValue, ::testing::ValuesIn(kv_groups()),
                         &ft::testing::group_name<ft::ForwardImpl>);

// The staircase computes self-attention only, and says so before any launch (no GPU needed);
// `fastest` lists both features.
TEST(Ch07KeyValue, OnlyFastestTakesThem) {
  ft::Problem lengths = ft::with_kv(ft::make_problem(1, 2, 17, 64, true, ft::DType::BFloat16), 40, 2,
                                    ft::CausalAlign::BottomRight);
  ft::Problem grouped = ft::with_kv(ft::make_problem(1, 2, 17, 64, true, ft::DType::BFloat16), 17, 1);
  for (const auto& impl : ch07::forward_impls()) {
    const bool fastest = impl.variant == "fastest";
    EXPECT_EQ(impl.features.lengths, fastest) << impl.variant;
    EXPECT_EQ(impl.features.grouped, fastest) << impl.variant;
    if (fastest) continue;
    EXPECT_THROW(ft::check_supported(impl, lengths), ft::Unsupported) << impl.variant;
    EXPECT_THROW(ft::check_supported(impl, grouped), ft::Unsupported) << impl.variant;
    EXPECT_THROW(impl.run(grouped, ft::ForwardArgs{}, nullptr), ft::Unsupported) << impl.variant;
  }
}

// Grouped-query heads proper (2 sequences of 8 query heads over 2 key/value heads: heads 0-3
// read key/value head 0, 4-7 head 1) on the tutorial's sizes, the views included: the
// decoding-like shape (16 queries over a 3000-token cache, bottom-right) and a square one.
TEST(Ch07KeyValue, GroupedQueryHeadsAndViews) {
  FT_REQUIRE_GPU();
  for (ft::DType t : {ft::DType::BFloat16, ft::DType::Float16})
    for (int d : {64, 128})
      for (auto [nq, nk] : {std::pair{16, 3000}, std::pair{1000, 1000}}) {
        const ft::Problem p = ft::with_kv(ft::make_problem(2, 8, nq, d, true, t), nk, 2,
                                          ft::CausalAlign::BottomRight);
        SCOPED_TRACE(p.describe());
        ft::testing::expect_forward_correct(ch07::fastest(), p);
        for (auto kind : {ft::testing::ViewKind::kProjection, ft::testing::ViewKind::kPadded}) {
          const ft::Layout layout = ft::testing::test_layout(p, kind);
          SCOPED_TRACE(ft::testing::view_name(kind));
          ft::testing::expect_forward_correct(ch07::fastest(), p, ft::InputKind::Uniform,
                                              ft::testing::kDtypeTolerance, &layout);
        }
      }
}

// Views (strides.hpp): `fastest` reads q, k, v where their strides say and writes O there,
// on the ragged sizes, causal and not; the inputs' gaps hold NaN (a read there fails the
// check) and the output's gaps must keep their poison. One test per kind of view.
void expect_views_correct(ft::testing::ViewKind kind) {
  FT_REQUIRE_GPU();
  for (ft::DType t : {ft::DType::BFloat16, ft::DType::Float16})
    for (int n : {1, 17, 1000})
      for (int d : {64, 128})
        for (bool causal : {false, true}) {
          if (t == ft::DType::Float16 && n != 1000) continue;  // fp16: the same code, one size
          const ft::Problem p = Shape{n, d, causal, t}.problem();
          const ft::Layout layout = ft::testing::test_layout(p, kind);
          SCOPED_TRACE(std::string(ft::testing::view_name(kind)) + " views, " + p.describe());
          ft::testing::expect_forward_correct(ch07::fastest(), p, ft::InputKind::Uniform,
                                              ft::testing::kDtypeTolerance, &layout);
        }
}
TEST(Ch07Views, ProjectionViews) { expect_views_correct(ft::testing::ViewKind::kProjection); }
TEST(Ch07Views, PaddedViews) { expect_views_correct(ft::testing::ViewKind::kPadded); }

// Only `fastest` reads views; the staircase's variants refuse a layout, and `fastest` one
// whose rows are not 16-byte aligned, before any launch (no GPU needed).
TEST(Ch07Views, RefusedWhereTheyCannotBeRead) {
  const ft::Problem p = ft::make_problem(2, 3, 64, 64, false, ft::DType::BFloat16);
  const ft::Layout views = ft::testing::test_layout(p, ft::testing::ViewKind::kProjection);
  ft::ForwardArgs a{};
  a.layout = &views;
  for (const auto& impl : ch07::forward_impls()) {
    EXPECT_EQ(impl.strided, impl.variant == "fastest") << impl.variant;
    if (!impl.strided) EXPECT_THROW(impl.run(p, a, nullptr), ft::Unsupported) << impl.variant;
  }
  ft::Layout odd = views;
  odd.K.row += 4;  // 8 bytes: rows no longer 16-byte aligned
  a.layout = &odd;
  EXPECT_THROW(ch07::fastest().run(p, a, nullptr), ft::Unsupported);
  // The tests' own views keep every rule, and no two tensors share strides.
  for (auto kind : {ft::testing::ViewKind::kProjection, ft::testing::ViewKind::kPadded})
    for (int n : {1, 17, 1000})
      for (int d : {64, 128}) {
        const ft::Problem q = Shape{n, d, false, ft::DType::BFloat16}.problem();
        const ft::Layout l = ft::testing::test_layout(q, kind);
        EXPECT_NO_THROW(ft::check_layout(q, l, true)) << ft::testing::view_name(kind);
        EXPECT_NE(l.Q.row, l.K.row);
        EXPECT_NE(l.K.row, l.V.row);
        EXPECT_NE(l.O.row, l.dO.row);
        EXPECT_NE(l.dK.row, l.dV.row);
      }
}

// float32 and other head dims are refused before any launch (no GPU needed).
TEST(Ch07, RefusesFloat32AndOtherHeadDims) {
  for (const auto& impl : ch07::forward_impls()) {
    EXPECT_EQ(impl.head_dims, (std::vector<int>{64, 128})) << impl.variant;
    EXPECT_EQ(impl.min_sm, 80) << impl.variant;
    ft::Problem p = ft::make_problem(1, 1, 16, 64, false, ft::DType::Float32);
    EXPECT_THROW(ft::check_supported(impl, p), ft::Unsupported) << impl.variant;
    EXPECT_THROW(impl.run(p, ft::ForwardArgs{}, nullptr), ft::Unsupported) << impl.variant;
    p.dtype = ft::DType::BFloat16;
    p.head_dim = 96;
    EXPECT_THROW(ft::check_supported(impl, p), ft::Unsupported) << impl.variant;
  }
}

}  // namespace
