// GPU tests of chapter 08: each distinct kernel (plain, async, dq_pass, split_tail) on
// the standard sizes (N = 1, 17, 64, 1000, 2048) in bf16 and fp16 (split_tail in fp16
// on the ragged ones, N = 1, 17, 1000), the other variants on the ragged sizes in bf16,
// d = 64 and 128, causal and not, B = 2 and H = 1, and fastest at N = 4096 (B = 1, H = 2),
// against the float64 reference of the rounded inputs under the same-precision rule
// (common/harness/testing.hpp), P recomputed from the saved lse (PSource::kFromLse), every output
// poisoned first; plus large scores and many heads. The shapes below N = 1000 of a variant
// and dtype share one test (Ch08SmallShapes). Without a GPU they skip; the refusals run
// anywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "schedule/tail_split.hpp"
#include "08_tensor_core_backward/tensor_core_backward.hpp"
#include "device/launch.cuh"  // ft::max_dynamic_smem, ft::sm_count
#include "core/check.cuh"
#include "reference/precision.hpp"
#include "harness/testing.hpp"
#include "harness/traffic.hpp"  // ft::gpu_facts: the SM count of the ledger's plan
#include "harness/verify.hpp"

namespace {

using ft::testing::PSource;
using ft::testing::Shape;
using Case = ft::testing::BackwardCase;
constexpr auto case_name = &ft::testing::case_name<ft::BackwardImpl>;

/// The variants whose code is tested on every standard shape: one per kernel (synchronous
/// copies; cp.async; the separate dQ pass; the warp_tiles kernel, in its fastest form). The
/// others are one of these kernels with other tile constants (wide_kv, async_br32,
/// async_bc64), or the warp_tiles kernel a few steps short of split_tail (warp_tiles,
/// hoisted, spread_atomics, pipelined_dk, late_copy, dq_pointer: each one trait from the
/// next, every path of the kernel's code the same but for those traits). split_tail's own
/// code runs only in the blocks of the tiles it cuts: the two-head standard cases cut every
/// tile, and a grid of whole and cut tiles runs both paths in one launch
/// (SplitTailCutTilesMatchReference). warp_tiles also differs in its lane offsets
/// (LaneOffsets) and, at d = 64, in re-reading P from Pᵀ, so it is also tested on large
/// scores (large_score_cases). They run the ragged shapes in bf16. "fastest" runs
/// split_tail's kernels (a static_assert in tensor_core_backward.cu), its own dispatch
/// tested on the ragged shapes.
bool fully_tested(const std::string& variant) {
  return variant == "plain" || variant == "async" || variant == "dq_pass" || variant == "split_tail";
}

/// A grid of whole and cut key tiles on the H200's 132 SMs: 45 heads of N = 300, 3 key tiles
/// each (135 tiles: 132 whole, 3 cut), non-causal.
constexpr int kMixedHeads = 45, kMixedN = 300;

/// split_tail's plan for that problem at head dim d on a GPU of `sms` SMs.
ft::schedule::TailSplit mixed_grid_plan(int d, int sms) {
  const int Br = d == 64 ? 128 : 64, Bc = 128;  // WarpTileTraits' tiles
  return ft::schedule::plan_tail_split(kMixedHeads * ((kMixedN + Bc - 1) / Bc), (kMixedN + Br - 1) / Br, sms, false, Bc, d);
}

/// The ragged sizes every variant is tested on: one query, one partial tile, and a
/// thousand (a partial last tile of every tile shape here).
bool ragged(int seq_len) { return seq_len == 1 || seq_len == 17 || seq_len == 1000; }

/// Every variant's standard cases: what it is tested on (the file comment).
std::vector<Case> standard_cases() {
  std::vector<Case> cases;
  for (const auto& impl : ch08::backward_impls()) {
    const bool full = fully_tested(impl.variant);
    for (ft::DType t : impl.dtypes) {
      // split_tail in fp16: the ragged shapes only (fp16 and bf16 differ in the
      // conversions and the mma's type, which the other full variants test on every shape).
      const bool full_here = full && !(impl.variant == "split_tail" && t == ft::DType::Float16);
      if (!full && t != ft::DType::BFloat16) continue;
      for (const auto& shape : ft::testing::standard_shapes(impl.head_dims, t))
        if (full_here || ragged(shape.seq_len)) cases.push_back({impl, shape, t});
    }
  }
  return cases;
}

// The C API and the Python module call fastest(): split_tail's kernel at both d (the same
// template instances, which the standard cases cover in full; a static_assert in
// tensor_core_backward.cu ties Fastest to SplitTail); its own dispatch is tested on
// the ragged shapes (standard_cases). Its label and its dispatch name that variant, and its
// ledger that kernel's: on a causal problem, which split_tail never cuts, the same three
// kernels as dq_pointer's; on a non-causal one, split_tail's lines, with store_shared_tiles
// where the ledger's plan (on the model GPU's SM count: this GPU's, or the H200's without
// one) cuts: 45 heads of N = 300 cut on 132 SMs, and on others not (68, 84, 148, ...).
TEST(Ch08, FastestIsSplitTail) {
  const auto impls = ch08::backward_impls();
  const auto split_tail = std::find_if(impls.begin(), impls.end(),
                                       [](const ft::BackwardImpl& i) { return i.variant == "split_tail"; });
  ASSERT_NE(split_tail, impls.end());
  const auto kernels = [](const ft::BackwardImpl& impl, const ft::Problem& p) {
    std::vector<std::string> names;
    for (const auto& t : impl.traffic(p)) names.push_back(t.kernel);
    return names;
  };
  for (int d : {64, 128}) {
    const std::string picked = ch08::fastest_variant(d, SIZE_MAX);
    EXPECT_EQ(picked, "split_tail");
    EXPECT_EQ(ch08::fastest().what.rfind(picked + " (", 0), 0u) << ch08::fastest().what;
    const ft::Problem causal = ft::make_problem(1, 1, 256, d, true, ft::DType::BFloat16);
    EXPECT_EQ(kernels(ch08::fastest(), causal),
              (std::vector<std::string>{"dot_dO_O_tc", "flash_backward_warp_tiles", "convert_dq"}));
    const ft::Problem cut = ft::make_problem(1, kMixedHeads, kMixedN, d, false, ft::DType::BFloat16);
    EXPECT_EQ(kernels(ch08::fastest(), cut), kernels(*split_tail, cut));
    const ft::schedule::TailSplit plan = mixed_grid_plan(d, int(ft::gpu_facts().sms));
    const auto names = kernels(ch08::fastest(), cut);
    EXPECT_EQ(std::find(names.begin(), names.end(), "store_shared_tiles") != names.end(), plan.parts > 1)
        << plan.parts << " parts on " << ft::gpu_facts().sms << " SMs";
  }
}

// On this GPU fastest's dispatch picks split_tail when the GPU grants a block its shared
// memory (the H100 and H200 do), async_bc64 when not, and either way computes what the
// variant it picked computes.
TEST(Ch08, FastestRunsTheVariantItsDispatchPicks) {
  FT_REQUIRE_GPU();
  for (int d : {64, 128}) {
    const std::string picked = ch08::fastest_variant(d, ft::max_dynamic_smem());
    SCOPED_TRACE("d=" + std::to_string(d) + " picked " + picked);
    EXPECT_TRUE(picked == "split_tail" || picked == "async_bc64");
    const auto impls = ch08::backward_impls();
    const auto it = std::find_if(impls.begin(), impls.end(),
                                 [&](const ft::BackwardImpl& i) { return i.variant == picked; });
    ASSERT_NE(it, impls.end());
    const ft::Problem p = ft::make_problem(1, 2, 300, d, true, ft::DType::BFloat16);
    const auto in = ft::reference_inputs(p, ft::InputKind::Uniform, 7);
    const auto fast = ft::testing::run_backward(ch08::fastest(), p, in);
    const auto same = ft::testing::run_backward(*it, p, in);
    // The same kernels on the same inputs: dK, dV (each written once: causal, split_tail
    // cuts nothing) bit for bit; dQ, whose float32 atomics land in whatever order, to its
    // last bits.
    EXPECT_EQ(fast.dK, same.dK);
    EXPECT_EQ(fast.dV, same.dV);
    std::vector<double> dq(same.dQ.begin(), same.dQ.end());
    const ft::VerifyResult v = ft::verify("dQ", fast.dQ.data(), dq.data(), dq.size(), 1e-3);
    EXPECT_TRUE(v.ok) << v.message;
  }
}

/// A case's problem with B = 2, H = 1 instead of the standard shapes' B·H = 6: more than
/// one head at a third of the float64 reference's CPU time, which sets the README test
/// command's wall time. (This chapter's kernels see B·H only, as one index;
/// Ch08.ManyHeadsAndCustomScale runs 70 000 heads.)
ft::Problem two_heads(const Case& c) {
  ft::Problem p = c.problem();
  p.batch = 2;
  p.heads_q = p.heads_kv = 1;
  return p;
}

class Ch08Standard : public ::testing::TestWithParam<Case> {};

TEST_P(Ch08Standard, MatchesReference) {
  FT_REQUIRE_GPU();
  ft::testing::expect_backward_correct(GetParam().impl, two_heads(GetParam()),
                                       ft::InputKind::Uniform, ft::testing::kDtypeTolerance,
                                       PSource::kFromLse);
}

INSTANTIATE_TEST_SUITE_P(AllVariants, Ch08Standard,
                         ::testing::ValuesIn(ft::testing::cases_by_size(standard_cases(), false)),
                         case_name);

// The standard cases below N = 1000, one test per variant and dtype (ft::testing::ShapeGroup:
// a GPU test's process start is most of a small one's time).
class Ch08SmallShapes : public ::testing::TestWithParam<ft::testing::ShapeGroup<ft::BackwardImpl>> {};

TEST_P(Ch08SmallShapes, MatchReference) {
  FT_REQUIRE_GPU();
  ft::testing::check_each_shape(GetParam(), [](const Case& c) {
    ft::testing::expect_backward_correct(c.impl, two_heads(c), ft::InputKind::Uniform,
                                         ft::testing::kDtypeTolerance, PSource::kFromLse);
  });
}

INSTANTIATE_TEST_SUITE_P(AllVariants, Ch08SmallShapes,
                         ::testing::ValuesIn(ft::testing::small_shape_groups(standard_cases())),
                         &ft::testing::group_name<ft::BackwardImpl>);

// N = 4096, the shortest sequence of the chapter's performance targets, through fastest (the
// C API's and Python's kernel) at both d, causal and not, B·H = 2: bf16 without the mask,
// fp16 with it. (A float64 reference of 4096² scores a head costs about 10 s of CPU, so four
// cases rather than eight; the fully tested kernels run every shape up to 2048 in both
// dtypes above.)
std::vector<Case> long_cases() {
  std::vector<Case> cases;
  for (int d : {64, 128})
    for (bool causal : {false, true}) {
      const ft::DType t = causal ? ft::DType::Float16 : ft::DType::BFloat16;
      cases.push_back({ch08::fastest(), Shape{4096, d, causal, t}, t});
    }
  return cases;
}

class Ch08Long : public ::testing::TestWithParam<Case> {};

TEST_P(Ch08Long, MatchesReference) {
  FT_REQUIRE_GPU();
  const Shape& s = GetParam().shape;
  const ft::Problem p = ft::make_problem(1, 2, s.seq_len, s.head_dim, s.causal, s.dtype);
  ft::testing::expect_backward_correct(GetParam().impl, p, ft::InputKind::Uniform,
                                       ft::testing::kDtypeTolerance, PSource::kFromLse);
}

INSTANTIATE_TEST_SUITE_P(Fastest, Ch08Long, ::testing::ValuesIn(long_cases()), case_name);

// Raw scores near ±1e4: P = exp(S·scale − L) overflows unless the saved lse is subtracted
// inside the exponent (and a masked entry's exp, which may be Inf, must be replaced, not
// multiplied by 0).
std::vector<Case> large_score_cases() {
  std::vector<Case> cases;
  for (const auto& impl : ch08::backward_impls()) {
    // warp_tiles in bf16 too: its own address code and, at d = 64, its re-read of P.
    const bool own_code = impl.variant == "warp_tiles";
    if (!fully_tested(impl.variant) && !own_code) continue;
    for (ft::DType t : impl.dtypes) {
      if (own_code && t != ft::DType::BFloat16) continue;
      for (int n : {17, 1000})
        for (bool causal : {false, true}) cases.push_back({impl, Shape{n, 64, causal, t}, t});
    }
  }
  return cases;
}

class Ch08LargeScores : public ::testing::TestWithParam<Case> {};

TEST_P(Ch08LargeScores, NoOverflow) {
  FT_REQUIRE_GPU();
  ft::testing::expect_backward_correct(GetParam().impl, two_heads(GetParam()),
                                       ft::InputKind::LargeScores, ft::testing::kDtypeTolerance,
                                       PSource::kFromLse);
}

INSTANTIATE_TEST_SUITE_P(AllVariants, Ch08LargeScores, ::testing::ValuesIn(large_score_cases()),
                         case_name);

// B·H = 70 000 heads on grid.x (past grid.y's 65 535), and a scale other than 1/sqrt(d).
TEST(Ch08, ManyHeadsAndCustomScale) {
  FT_REQUIRE_GPU();
  ft::Problem p = ft::make_problem(700, 100, 5, 64, true, ft::DType::BFloat16);
  for (const auto& impl : ch08::backward_impls())
    if (fully_tested(impl.variant)) {
      SCOPED_TRACE(impl.variant);
      ft::testing::expect_backward_correct(impl, p, ft::InputKind::Uniform,
                                           ft::testing::kDtypeTolerance, PSource::kFromLse);
    }
  p = ft::make_problem(1, 2, 300, 128, false, ft::DType::Float16);
  p.scale = 0.05f;
  for (const auto& impl : ch08::backward_impls()) {
    SCOPED_TRACE(impl.variant);
    ft::testing::expect_backward_correct(impl, p, ft::InputKind::Uniform,
                                         ft::testing::kDtypeTolerance, PSource::kFromLse);
  }
}

// split_tail on a grid whose last wave it cuts on this GPU: 45 heads of N = 300, 3 key tiles
// each (135 tiles: on 132 SMs, 132 blocks of dq_pointer's code and 3 tiles cut into parts, in
// one grid), non-causal, d = 64 in bf16 and d = 128 in fp16. (The ragged standard cases, two
// heads, cut every tile.) The plan is asserted, so that the test cannot pass without running
// the cut path.
TEST(Ch08, SplitTailCutTilesMatchReference) {
  FT_REQUIRE_GPU();
  const auto impls = ch08::backward_impls();
  const auto it = std::find_if(impls.begin(), impls.end(),
                               [](const ft::BackwardImpl& i) { return i.variant == "split_tail"; });
  ASSERT_NE(it, impls.end());
  for (const auto& [d, t] : {std::pair{64, ft::DType::BFloat16}, std::pair{128, ft::DType::Float16}}) {
    const ft::Problem p = ft::make_problem(1, kMixedHeads, kMixedN, d, false, t);
    const ft::schedule::TailSplit plan = mixed_grid_plan(d, ft::sm_count());
    SCOPED_TRACE("d=" + std::to_string(d) + ": " + std::to_string(plan.first) + " whole tiles, " +
                 std::to_string(plan.tiles) + " cut into " + std::to_string(plan.parts));
    ASSERT_GT(plan.parts, 1) << "this GPU's plan cuts nothing here; choose another head count";
    ft::testing::expect_backward_correct(*it, p, ft::InputKind::Uniform, ft::testing::kDtypeTolerance,
                                         PSource::kFromLse);
  }
}

// The two dQ strategies (atomics into a float32 accumulator; a separate pass per query
// tile) sum the same products in different orders: their dQ agree to bf16 rounding, and
// dK, dV (the same key-block kernel but for the dQ part) agree as closely.
TEST(Ch08, DqStrategiesAgree) {
  FT_REQUIRE_GPU();
  const auto impls = ch08::backward_impls();
  const auto find = [&](const char* name) {
    return *std::find_if(impls.begin(), impls.end(),
                         [&](const ft::BackwardImpl& i) { return i.variant == name; });
  };
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "non-causal");
    const ft::Problem p = ft::make_problem(2, 3, 1000, 64, causal, ft::DType::BFloat16);
    const auto in = ft::reference_inputs(p, ft::InputKind::Uniform, 5);
    const auto a = ft::testing::run_backward(find("async"), p, in);
    const auto b = ft::testing::run_backward(find("dq_pass"), p, in);
    std::vector<double> dq_b(b.dQ.begin(), b.dQ.end());
    const ft::VerifyResult v = ft::verify("dQ", a.dQ.data(), dq_b.data(), a.dQ.size(), 1e-2);
    EXPECT_TRUE(v.ok) << v.message;
    EXPECT_GT(v.rel_l2, 0.0);  // different summation orders: not bit-identical
    // The key-block kernel's dK, dV do not depend on the dQ part: the same operations in
    // the same order (bit-identical unless the compiler schedules an FMA differently).
    for (const auto* t : {&a.dK, &a.dV}) {
      const auto& other = t == &a.dK ? b.dK : b.dV;
      std::vector<double> ref(other.begin(), other.end());
      const ft::VerifyResult w = ft::verify("dK/dV", t->data(), ref.data(), t->size(), 1e-6);
      EXPECT_TRUE(w.ok) << w.message;
    }
  }
}

// Views (strides.hpp): `fastest` (split_tail's kernels) reads q, k, v, o, do where their
// strides say and writes dQ, dK, dV there, on the ragged sizes, causal and not; the inputs'
// gaps hold NaN (a read there fails the check) and the outputs' gaps must keep their
// poison. Then split_tail's cut tiles (store_shared_tiles) and async_bc64, fastest's
// fallback on GPUs with less shared memory, on views too.
const ft::BackwardImpl& variant(const char* name) {
  static const auto impls = ch08::backward_impls();
  const auto it = std::find_if(impls.begin(), impls.end(),
                               [&](const ft::BackwardImpl& i) { return i.variant == name; });
  if (it == impls.end()) throw std::runtime_error(std::string("no variant ") + name);
  return *it;
}

void expect_views_correct(const ft::BackwardImpl& impl, const ft::Problem& p,
                          ft::testing::ViewKind kind) {
  const ft::Layout layout = ft::testing::test_layout(p, kind);
  SCOPED_TRACE(impl.variant + " on " + ft::testing::view_name(kind) + " views, " + p.describe());
  ft::testing::expect_backward_correct(impl, p, ft::InputKind::Uniform, ft::testing::kDtypeTolerance,
                                       PSource::kFromLse, &layout);
}

void expect_fastest_views_correct(ft::testing::ViewKind kind) {
  FT_REQUIRE_GPU();
  for (ft::DType t : {ft::DType::BFloat16, ft::DType::Float16})
    for (int n : {1, 17, 1000})
      for (int d : {64, 128})
        for (bool causal : {false, true}) {
          if (t == ft::DType::Float16 && n != 1000) continue;  // fp16: the same code, one size
          expect_views_correct(ch08::fastest(), Shape{n, d, causal, t}.problem(), kind);
        }
}
TEST(Ch08Views, ProjectionViews) { expect_fastest_views_correct(ft::testing::ViewKind::kProjection); }
TEST(Ch08Views, PaddedViews) { expect_fastest_views_correct(ft::testing::ViewKind::kPadded); }

TEST(Ch08Views, CutTilesAndTheFallback) {
  FT_REQUIRE_GPU();
  for (int d : {64, 128}) {
    for (bool causal : {false, true})
      expect_views_correct(variant("async_bc64"), Shape{1000, d, causal, ft::DType::BFloat16}.problem(),
                           ft::testing::ViewKind::kProjection);
    const ft::Problem cut = ft::make_problem(1, kMixedHeads, kMixedN, d, false, ft::DType::BFloat16);
    EXPECT_GT(mixed_grid_plan(d, ft::sm_count()).parts, 1)
        << "this GPU's plan cuts nothing here: split_tail's cut tiles untested on views";
    for (auto kind : {ft::testing::ViewKind::kProjection, ft::testing::ViewKind::kPadded})
      expect_views_correct(variant("split_tail"), cut, kind);
  }
}

// Only fastest, split_tail and async_bc64 read views; the other variants refuse a layout,
// and every variant one whose rows are not 16-byte aligned or whose outputs overlap, before
// any launch (no GPU needed).
TEST(Ch08Views, RefusedWhereTheyCannotBeRead) {
  const ft::Problem p = ft::make_problem(2, 3, 64, 64, false, ft::DType::BFloat16);
  const ft::Layout views = ft::testing::test_layout(p, ft::testing::ViewKind::kProjection);
  ft::BackwardArgs a{};
  a.layout = &views;
  for (const auto& impl : ch08::backward_impls()) {
    const bool reads_views = impl.variant == "fastest" || impl.variant == "split_tail" ||
                             impl.variant == "async_bc64";
    EXPECT_EQ(impl.strided, reads_views) << impl.variant;
    if (!reads_views) EXPECT_THROW(impl.run(p, a, nullptr), ft::Unsupported) << impl.variant;
  }
  ft::Layout odd = views;
  odd.dO.head += 4;  // 8 bytes: rows no longer 16-byte aligned
  a.layout = &odd;
  EXPECT_THROW(ch08::fastest().run(p, a, nullptr), ft::Unsupported);
  ft::Layout overlapping = views;
  overlapping.dK.row = 8;  // tokens 8 elements apart, rows of 64: written twice
  a.layout = &overlapping;
  EXPECT_THROW(ch08::fastest().run(p, a, nullptr), ft::Unsupported);
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
