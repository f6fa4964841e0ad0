/// @file testing.hpp
/// @brief GoogleTest helpers shared by every chapter's GPU tests: the standard shape grid
/// and one call that checks an implementation against the float64 reference, under the
/// same-precision rule of precision.hpp.
///
/// **The rule**, per output tensor (O, lse; dQ, dK, dV): relative L2 error against the
/// float64 reference
///
///     error ≤ min(cap, max(floor, 2 × baseline))
///
/// - baseline: the error of the same precision's unfused computation on the same inputs
///   (precision.hpp; the larger of its two summation orders);
/// - cap: the fixed tolerance (ft::fixed_tolerance() of verify.hpp: 1e-4 float32, 1e-2
///   bf16/fp16; kLargeScoreTolerance for float32 LargeScores), the absolute bound;
/// - floor: error_floor() of the tensor's storage type (float32: 1.0e-6), below which two
///   correct computations differ by rounding luck alone.
///
/// A tensor whose reference is exactly zero (dQ and dK when N = 1) has no relative error;
/// for it, and when the unfused computation itself overflows (its error is not finite), only
/// the cap applies. Every output is poisoned with NaN before the run, and any NaN or Inf
/// fails.
#pragma once

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "harness/harness.hpp"
#include "reference/precision.hpp"
#include "harness/verify.hpp"

namespace ft::testing {

/// Skips the current test with a clear message when there is no usable CUDA GPU.
#define FT_REQUIRE_GPU()                                                       \
  do {                                                                         \
    std::string ft_why_;                                                       \
    if (!::ft::gpu_available(&ft_why_))                                        \
      GTEST_SKIP() << ft_why_ << ": GPU test skipped";                         \
  } while (0)

/// Skips the current test unless a GPU is here whose compute capability's major number is
/// from `lo` to `hi` (9 to 9: sm_90a machine code, which only Hopper runs), saying `what`
/// the test needs.
#define FT_REQUIRE_CC(lo, hi, what)                                                      \
  do {                                                                                   \
    FT_REQUIRE_GPU();                                                                    \
    int ft_major_ = 0;                                                                   \
    CUDA_CHECK(cudaDeviceGetAttribute(&ft_major_, cudaDevAttrComputeCapabilityMajor, 0)); \
    if (ft_major_ < (lo) || ft_major_ > (hi)) GTEST_SKIP() << what;                      \
  } while (0)

/// One test shape. B·H = 2·3 so that batch and head strides are both exercised.
struct Shape {
  int seq_len;  ///< N_q (and N_kv unless len_kv says otherwise)
  int head_dim;
  bool causal;
  DType dtype = DType::Float32;
  int len_kv = 0;    ///< N_kv; 0: seq_len (self-attention)
  int heads_kv = 3;  ///< key/value heads of the 3 query heads: 3, or 1 (multi-query)
  CausalAlign align = CausalAlign::TopLeft;  ///< where the causal diagonal sits (problem.hpp)
  Problem problem() const;
};

/// How GoogleTest prints a Shape in test listings and failures (instead of raw bytes).
inline void PrintTo(const Shape& s, std::ostream* os) { *os << s.problem().describe(); }

/// N ∈ {1, 17, 64, 1000, 2048} × the given d × {non-causal, causal}: ragged sizes that are
/// not multiples of any tile, the single-token case, and sizes past one tile.
std::vector<Shape> standard_shapes(const std::vector<int>& head_dims = {32, 64, 128},
                                   DType dtype = DType::Float32);

/// Shapes beyond self-attention, for the implementations that take them (Features): two
/// lengths (N_q, N_kv) ∈ {(17, 1000), (1000, 17), (1, 300), (300, 1), (200, 130)} × the
/// given d × {non-causal, causal top-left, causal bottom-right}; and multi-query heads (3
/// query heads over one key/value head) at N ∈ {17, 1000}, causal and not, and over a cache
/// of 2N + 5 keys, causal bottom-right.
std::vector<Shape> kv_shapes(const std::vector<int>& head_dims, DType dtype);

/// "N1000_d64_causal" ("N1000_d64_causal_bf16" for a 16-bit shape; "N17_Nkv1000_Hkv1_d64_causal_br"
/// with two lengths, grouped heads and the bottom-right alignment): a test-name suffix.
std::string shape_name(const Shape& s);

/// One implementation (a ForwardImpl or a BackwardImpl) on one shape in one dtype: the
/// parameter of the tensor-core chapters' parameterized tests.
template <class Impl>
struct ImplCase {
  Impl impl;
  Shape shape;
  DType dtype;
  Problem problem() const {
    Problem p = shape.problem();
    p.dtype = dtype;
    return p;
  }
};
using ForwardCase = ImplCase<ForwardImpl>;
using BackwardCase = ImplCase<BackwardImpl>;

template <class Impl>
void PrintTo(const ImplCase<Impl>& c, std::ostream* os) {
  *os << c.impl.variant << ' ' << dtype_name(c.dtype) << ' ';
  PrintTo(c.shape, os);
}

/// "tuned_bf16_N1000_d64_causal": the test-name suffix of a case ("plain_N1000_d64_causal_bf16"
/// when the shape names the dtype itself). Pass `&case_name<ForwardImpl>` (or BackwardImpl)
/// to INSTANTIATE_TEST_SUITE_P.
template <class Impl>
std::string case_name(const ::testing::TestParamInfo<ImplCase<Impl>>& info) {
  const ImplCase<Impl>& c = info.param;
  const std::string dtype = c.shape.dtype == c.dtype ? "" : std::string(dtype_name(c.dtype)) + "_";
  return c.impl.variant + "_" + dtype + shape_name(c.shape);
}

/// Shapes below this N take a fraction of a second on the GPU; the tensor-core chapters run
/// them together, one test per variant and dtype (ShapeGroup), and larger ones one test each.
constexpr int kOwnTestFrom = 1000;

/// One implementation's shapes in one dtype, checked by one test. ctest runs every test in a
/// process of its own (gtest_discover_tests), and a process that touches the GPU took about
/// 2.5 s to start on the H200 with 15 others beside it (an N = 1 test: 2.4-3.3 s in
/// plots/results/h200/readme_test_442e5a3.log): most of a small test's time and, over a few
/// hundred of them, of the README's test command. A failure names its shape (SCOPED_TRACE).
template <class Impl>
struct ShapeGroup {
  Impl impl;
  DType dtype;
  std::vector<Shape> shapes;
  ImplCase<Impl> at(const Shape& s) const { return {impl, s, dtype}; }
};

template <class Impl>
void PrintTo(const ShapeGroup<Impl>& g, std::ostream* os) {
  *os << g.impl.variant << ' ' << dtype_name(g.dtype) << ", " << g.shapes.size() << " shapes";
}

/// The cases with N below kOwnTestFrom (`small`) or from it on, in their order.
template <class Impl>
std::vector<ImplCase<Impl>> cases_by_size(const std::vector<ImplCase<Impl>>& cases, bool small) {
  std::vector<ImplCase<Impl>> out;
  for (const auto& c : cases)
    if ((c.shape.seq_len < kOwnTestFrom) == small) out.push_back(c);
  return out;
}

/// The small cases (N below kOwnTestFrom) grouped by variant and dtype, in their order.
template <class Impl>
std::vector<ShapeGroup<Impl>> small_shape_groups(const std::vector<ImplCase<Impl>>& cases) {
  std::vector<ShapeGroup<Impl>> groups;
  for (const auto& c : cases_by_size(cases, true)) {
    if (groups.empty() || groups.back().impl.variant != c.impl.variant || groups.back().dtype != c.dtype)
      groups.push_back({c.impl, c.dtype, {}});
    groups.back().shapes.push_back(c.shape);
  }
  return groups;
}

/// check(c) for the ImplCase of each of the group's shapes, a failure traced with its shape.
template <class Impl, class Check>
void check_each_shape(const ShapeGroup<Impl>& g, Check check) {
  ASSERT_FALSE(g.shapes.empty());
  for (const Shape& s : g.shapes) {
    SCOPED_TRACE(shape_name(s));
    check(g.at(s));
  }
}

/// "tuned_bf16": the test-name suffix of a group. Pass `&group_name<ForwardImpl>` (or
/// BackwardImpl) to INSTANTIATE_TEST_SUITE_P.
template <class Impl>
std::string group_name(const ::testing::TestParamInfo<ShapeGroup<Impl>>& info) {
  return info.param.impl.variant + "_" + dtype_name(info.param.dtype);
}

/// The same-precision factor: an implementation may be this many times as far from the
/// float64 reference as the unfused computation of its dtype.
constexpr double kSamePrecisionFactor = 2.0;

/// The floor under 2 × baseline for a tensor stored as `t` (lse: float32 in every problem):
/// one rounding of every stored value, u(t), plus 16 float32 roundings, 16·2^-24, for the
/// float32 arithmetic every implementation does in its own order. float32: 17·2^-24 ≈
/// 1.0e-6; bf16: 3.9e-3; fp16: 4.9e-4.
///
/// Why a floor: on easy inputs the baseline is nearly exact (N = 1: O = V with no rounding
/// at all, dV = dO; small problems whose error is a few dozen roundings), and there the ratio
/// of two tiny errors is rounding luck, not lost precision. Why this one (CPU emulations of
/// the float32 kernels of chapters 01–05, test_precision.cpp's emulate_*, on the uniform
/// standard shapes): at N ≤ 64 the baseline is 0 to 3.4e-7 and the emulated kernels reach
/// up to 4.1× it (lse at N = 1), yet never more than 3.7e-7, 2.7× under the floor; from
/// N = 1000 on, every kernel is within 1.2× the baseline (7e-7 to 1.1e-6), and the 2× rule
/// decides. For bf16 and fp16 the u(t) term dominates: no implementation can store a value
/// more exactly than one rounding, and the floor stays under the 1e-2 cap, so that the 2×
/// rule still decides above it.
constexpr double error_floor(DType t) {
  return unit_roundoff(t) + 16 * unit_roundoff(DType::Float32);
}

/// The fixed cap for InputKind::LargeScores (float32; raw scores near ±1e4, ≈1e3 after the
/// scale). It is derived from what the float32 unfused baseline measures on the large-score
/// shapes of the tests (d = 64, N = 17 and 1000, causal and not; test_precision.cpp prints
/// them): the worst tensors are dQ and dK at 7.2e-5, whose error comes from the scores
/// themselves (a float32 S ≈ 1e3 carries rounding errors of order 1e3·2^-24 ≈ 6e-5, and
/// they land in the exponent of every P); O, dV and lse stay at or below 6.4e-6. So the 2×
/// rule allows at most 1.44e-4 on these inputs, and the cap, 2e-4, sits just above: it
/// never decides for a correct baseline, and bounds everything should the baseline itself
/// go wrong. A lost max-subtraction gives Inf or NaN, which fails before any tolerance.
constexpr double kLargeScoreTolerance = 2e-4;

/// The limit a tensor is held to (the rule above): min(cap, max(floor, 2 × baseline));
/// just `cap` when the baseline is not finite or `ref_is_zero`.
double allowed_error(double baseline, DType storage, double cap, bool ref_is_zero = false);

/// Host copies of what a forward wrote (outputs poisoned with NaN before the run), dense
/// [B, H, N, d] whatever the layout; `gap_writes` counts the elements of the outputs' buffers
/// outside their views (strides.hpp) that were written (0 for a correct kernel).
struct ForwardOutputs {
  std::vector<float> O, lse;
  int64_t gap_writes = 0;
};
/// Host copies of what a backward wrote, with its paired forward's O and lse.
struct BackwardOutputs {
  std::vector<float> O, lse, dQ, dK, dV;
  int64_t gap_writes = 0;
};

/// The views the GPU tests give the kernels that read them (ft::Views), with gaps between the
/// rows so that a read outside a tensor's elements (the gaps of the inputs hold NaN) or a
/// write there (the outputs' gaps are checked to still hold the poison) shows.
enum class ViewKind {
  /// A model's: q, k and v [B, H, N, d] views of a [B, N, 3, H, d] product (each in a buffer
  /// of its own here, the other two's places the gaps); O, dO and the gradients [B, N, H, d];
  /// each token's row followed by a gap of its own size per tensor (8, 16, ... elements).
  kProjection,
  /// [B, H, N, d], each row followed by a gap, each head and each batch by the same gap
  /// again, its size the tensor's own (8, 16, ... elements).
  kPadded,
};
/// Every tensor's strides for `kind` (the same for every tensor of a role, see ViewKind).
Layout test_layout(const Problem& p, ViewKind kind);
/// "projection", "padded": for test names and traces.
const char* view_name(ViewKind kind);

/// Runs `impl` once on `in` (outputs and workspace poisoned first) and downloads the outputs. For a
/// bf16/fp16 problem the inputs are rounded to the dtype and uploaded as 16-bit values, and
/// O (and the gradients) come back converted to float; lse is float32 throughout. With a
/// `layout` (an implementation that reads views), every tensor is laid out as it says: the
/// inputs scattered into buffers whose gaps hold NaN, the outputs gathered back to dense.
ForwardOutputs run_forward(const ForwardImpl& impl, const Problem& p, const AttentionInputs& in,
                           const Layout* layout = nullptr);
/// Runs the paired forward, then the backward, and downloads everything (the workspace
/// poisoned once, before the forward: chapter 05's baseline keeps P there for the backward).
BackwardOutputs run_backward(const BackwardImpl& impl, const Problem& p, const AttentionInputs& in,
                             const Layout* layout = nullptr);

/// As a `tolerance` argument: the default cap, fixed_tolerance(p.dtype), or
/// kLargeScoreTolerance for a float32 problem on InputKind::LargeScores.
constexpr double kDtypeTolerance = 0;

/// Runs `impl` on the problem's standard inputs (ft::reference_inputs: seeded by the shape,
/// rounded to p.dtype) with poisoned outputs and expects O and lse to pass the rule above,
/// `tolerance` being the cap (kDtypeTolerance: the default above). The reference and
/// the baseline come from ft::cached_reference (computed once per problem, input kind and
/// dtype, shared across test processes through FT_REFERENCE_CACHE). Returns the worst
/// relative error seen.
double expect_forward_correct(const ForwardImpl& impl, const Problem& p,
                              InputKind kind = InputKind::Uniform,
                              double tolerance = kDtypeTolerance, const Layout* layout = nullptr);

/// How a backward gets P: from a stored P (the unfused baseline does this), or recomputed
/// as exp(S·scale − L) from the one float32 log-sum-exp per row the layout contract saves.
enum class PSource { kStored, kFromLse };

/// The error a backward that recomputes P from the saved lse cannot avoid, on top of the
/// unfused computation's: L is one float32 per row, so it carries an absolute error of up to
/// half an ulp of |L| from each of the kLseRoundings roundings it goes through (m + log2 l in
/// base 2, × ln 2 to natural log in the forward, × log2 e back in the backward). An absolute
/// error δ in the exponent is a relative error δ in every P of that row, the same factor for
/// the whole row, so it does not average out in dV = Pᵀ·dO the way the unfused computation's
/// independent per-score roundings do. With scores of order 1e3 (InputKind::LargeScores)
/// that is 3 · 2^-24 · 1.3e3 ≈ 2.3e-4 relative, some 30× the unfused dV error (5e-6): the
/// price of the contract's single float per row, which chapter 05's README measures. On
/// uniform inputs (|L| ≤ 10) it is below the floor and changes nothing.
constexpr int kLseRoundings = 3;
/// kLseRoundings · 2^-24 · max_i |L_i|, the term the rule adds for PSource::kFromLse.
double lse_recompute_error(const std::vector<double>& lse);

/// Same for a backward implementation: dQ, dK, dV, and its paired forward's O and lse. A
/// backward that recomputes P from the lse (`p_source` = kFromLse: every flash backward) is
/// allowed lse_recompute_error() on top of max(floor, 2× baseline) for dQ, dK and dV, the
/// cap raised by the same amount; and, in bf16 and fp16, 2× ft::stored_o_error() on top
/// for dQ and dK: D = rowsum(dO∘O) comes from the O the forward stored in the dtype, which
/// on large logits is most of dP − D (precision.hpp says why; FlashAttention-2 reads the
/// same stored O).
/// `layout`: as in run_backward, and then no element outside the outputs' views may change.
double expect_backward_correct(const BackwardImpl& impl, const Problem& p,
                               InputKind kind = InputKind::Uniform,
                               double tolerance = kDtypeTolerance,
                               PSource p_source = PSource::kStored,
                               const Layout* layout = nullptr);

}  // namespace ft::testing
