/// @file testing.hpp
/// @brief GoogleTest helpers shared by every chapter's GPU tests: the standard shape grid
/// and one call that checks an implementation against the float64 reference.
#pragma once

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "harness.hpp"

namespace ft::testing {

/// Skips the current test with a clear message when there is no usable CUDA GPU.
#define FT_REQUIRE_GPU()                                                       \
  do {                                                                         \
    std::string ft_why_;                                                       \
    if (!::ft::gpu_available(&ft_why_))                                        \
      GTEST_SKIP() << "no CUDA GPU (" << ft_why_ << "): GPU test skipped";     \
  } while (0)

/// One test shape. B·H = 2·3 so that batch and head strides are both exercised.
struct Shape {
  int seq_len;
  int head_dim;
  bool causal;
  Problem problem() const;
};

/// How GoogleTest prints a Shape in test listings and failures (instead of raw bytes).
inline void PrintTo(const Shape& s, std::ostream* os) {
  *os << "N=" << s.seq_len << " d=" << s.head_dim << (s.causal ? " causal" : " non-causal");
}

/// N ∈ {1, 17, 64, 1000, 2048} × the given d × {non-causal, causal}: ragged sizes that are
/// not multiples of any tile, the single-token case, and sizes past one tile.
std::vector<Shape> standard_shapes(const std::vector<int>& head_dims = {32, 64, 128});

/// "N1000_d64_causal": a readable test-name suffix.
std::string shape_name(const Shape& s);

/// Relative L2 tolerance for InputKind::LargeScores. Raw scores near 1e4 carry a float32
/// rounding error of about eps·Σ|q_k·k_k| ≈ 6e-8 · 3e4 ≈ 2e-3 before scaling (≈ 3e-4 after),
/// and that error lands in the exponent, so P, O and the gradients inherit ~3e-4 relative
/// error from the inputs' conditioning alone, whatever the kernel does; 2e-3 leaves margin
/// while still failing on a lost max-subtraction (which gives Inf or NaN, not 1e-3).
constexpr double kLargeScoreTolerance = 2e-3;

/// Host copies of what a forward wrote (outputs poisoned with NaN before the run).
struct ForwardOutputs {
  std::vector<float> O, lse;
};
/// Host copies of what a backward wrote, with its paired forward's O and lse.
struct BackwardOutputs {
  std::vector<float> O, lse, dQ, dK, dV;
};
/// Runs `impl` once on `in` (outputs poisoned first) and downloads the outputs.
ForwardOutputs run_forward(const ForwardImpl& impl, const Problem& p, const AttentionInputs& in);
/// Runs the paired forward, then the backward, and downloads everything.
BackwardOutputs run_backward(const BackwardImpl& impl, const Problem& p, const AttentionInputs& in);

/// Runs `impl` on fresh random inputs with poisoned outputs and expects O and lse to match
/// the float64 reference within `tolerance` (relative L2), with no NaN/Inf anywhere.
/// Returns the worst relative error seen.
double expect_forward_correct(const ForwardImpl& impl, const Problem& p,
                              InputKind kind = InputKind::Uniform,
                              double tolerance = 1e-4);

/// Same for a backward implementation: dQ, dK, dV (after its paired forward, whose O and
/// lse are checked too).
double expect_backward_correct(const BackwardImpl& impl, const Problem& p,
                               InputKind kind = InputKind::Uniform,
                               double tolerance = 1e-4);

}  // namespace ft::testing
