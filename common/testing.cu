/// @file testing.cu
#include "testing.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "buffer.cuh"
#include "check.cuh"
#include "precision.hpp"
#include "verify.hpp"

namespace ft::testing {

Problem Shape::problem() const {
  Problem p;
  p.batch = 2;  // B·H = 6 > 1, with B ≠ H so a swapped stride shows
  p.heads = 3;
  p.seq_len = seq_len;
  p.head_dim = head_dim;
  p.causal = causal;
  p.dtype = dtype;
  return p;
}

std::vector<Shape> standard_shapes(const std::vector<int>& head_dims, DType dtype) {
  std::vector<Shape> shapes;
  for (int n : {1, 17, 64, 1000, 2048})
    for (int d : head_dims)
      for (bool causal : {false, true}) shapes.push_back({n, d, causal, dtype});
  return shapes;
}

std::string shape_name(const Shape& s) {
  return "N" + std::to_string(s.seq_len) + "_d" + std::to_string(s.head_dim) +
         (s.causal ? "_causal" : "_full") +
         (s.dtype == DType::Float32 ? "" : std::string("_") + dtype_name(s.dtype));
}

double allowed_error(double baseline, DType storage, double cap, bool ref_is_zero) {
  if (ref_is_zero || !std::isfinite(baseline)) return cap;
  return std::min(cap, std::max(error_floor(storage), kSamePrecisionFactor * baseline));
}

namespace {

/// A fixed seed per problem shape, so a failure reproduces, while different shapes draw
/// different numbers. (Not the dtype: a bf16 problem sees the float32 inputs, rounded.)
uint64_t seed_for(const Problem& p) {
  return 1000003ull * uint64_t(p.seq_len) + 101ull * uint64_t(p.head_dim) + (p.causal ? 7 : 0);
}

bool all_zero(const std::vector<double>& x) {
  for (double v : x)
    if (v != 0.0) return false;
  return true;
}

/// The rule's limit for one tensor: allowed_error, plus the backward's extra terms (none
/// where the reference is exactly zero: the cap alone).
double tensor_limit(const std::vector<double>& ref, double baseline, DType storage, double cap,
                    double extra) {
  const bool zero = all_zero(ref);
  return allowed_error(baseline, storage, cap, zero) + (zero ? 0.0 : extra);
}

/// Checks one tensor under the rule; returns its relative error.
double check(const char* name, const std::vector<float>& got, const std::vector<double>& ref,
             double baseline, DType storage, DType problem_dtype, double cap,
             double lse_term = 0.0, double stored_o_term = 0.0) {
  const bool zero = all_zero(ref);
  const double limit = tensor_limit(ref, baseline, storage, cap, lse_term + stored_o_term);
  const VerifyResult v = verify(name, got.data(), ref.data(), got.size(), limit);
  char why[320];
  if (zero)
    std::snprintf(why, sizeof why, "limit %.3g: the fixed cap (the reference is exactly zero)", limit);
  else
    std::snprintf(why, sizeof why,
                  "limit %.3g = min(cap %.3g, max(floor %.3g, %g x the unfused %s baseline's "
                  "%.3g)) + %.3g for P recomputed from the float32 lse + %.3g for D formed "
                  "from the stored O",
                  limit, cap, error_floor(storage), kSamePrecisionFactor,
                  dtype_name(problem_dtype), baseline, lse_term, stored_o_term);
  EXPECT_TRUE(v.ok) << v.message << "; " << why;
  return v.rel_l2;
}

double cap_for(const Problem& p, InputKind kind, double tolerance) {
  if (tolerance != kDtypeTolerance) return tolerance;
  return kind == InputKind::LargeScores && p.dtype == DType::Float32 ? kLargeScoreTolerance
                                                                     : fixed_tolerance(p.dtype);
}

}  // namespace

ForwardOutputs run_forward(const ForwardImpl& impl, const Problem& p, const AttentionInputs& in) {
  const size_t n = size_t(p.elems());
  DeviceTensor Q(p.dtype, n), K(p.dtype, n), V(p.dtype, n), O(p.dtype, n);
  DeviceBuffer<float> lse(size_t(p.rows()));
  DeviceBuffer<unsigned char> work(impl.workspace_bytes(p));
  Q.upload(in.Q);
  K.upload(in.K);
  V.upload(in.V);
  O.poison();
  lse.poison();
  impl.run(p, {Q.get(), K.get(), V.get(), O.get(), lse.get(), work.get()}, 0);
  CUDA_CHECK(cudaDeviceSynchronize());
  return {O.download(), lse.download()};
}

BackwardOutputs run_backward(const BackwardImpl& impl, const Problem& p,
                             const AttentionInputs& in) {
  const size_t n = size_t(p.elems());
  DeviceTensor Q(p.dtype, n), K(p.dtype, n), V(p.dtype, n), O(p.dtype, n), dO(p.dtype, n),
      dQ(p.dtype, n), dK(p.dtype, n), dV(p.dtype, n);
  DeviceBuffer<float> lse(size_t(p.rows()));
  DeviceBuffer<unsigned char> work(impl.workspace_bytes(p));
  Q.upload(in.Q);
  K.upload(in.K);
  V.upload(in.V);
  dO.upload(in.dO);
  for (auto* b : {&O, &dQ, &dK, &dV}) b->poison();
  lse.poison();
  impl.forward(p, {Q.get(), K.get(), V.get(), O.get(), lse.get(), work.get()}, 0);
  impl.run(p, {Q.get(), K.get(), V.get(), O.get(), lse.get(), dO.get(), dQ.get(), dK.get(),
               dV.get(), work.get()},
           0);
  CUDA_CHECK(cudaDeviceSynchronize());
  return {O.download(), lse.download(), dQ.download(), dK.download(), dV.download()};
}

double expect_forward_correct(const ForwardImpl& impl, const Problem& p, InputKind kind,
                              double tolerance) {
  const uint64_t seed = seed_for(p);
  const AttentionInputs in = reference_inputs(p, kind, seed);
  ForwardOutputs got;
  try {
    got = run_forward(impl, p, in);
  } catch (const DeviceTooSmall& e) {  // a GPU too small or too old: skip, saying why
    [&] { GTEST_SKIP() << e.what(); }();  // (GTEST_SKIP returns void: from the lambda)
    return 0.0;
  }
  const Reference& ref = cached_reference(p, kind, seed, false);
  SCOPED_TRACE("chapter " + impl.chapter + " " + impl.variant + " on " + p.describe());
  const double cap = cap_for(p, kind, tolerance);
  const TensorErrors& b = ref.baseline;
  const DType t = p.dtype, f32 = DType::Float32;
  return std::max(check("O", got.O, ref.tensors.O, b.O, t, t, cap),
                  check("lse", got.lse, ref.tensors.lse, b.lse, f32, t, cap));
}

double lse_recompute_error(const std::vector<double>& lse) {
  double largest = 0;
  for (double l : lse) largest = std::max(largest, std::fabs(l));
  return kLseRoundings * std::ldexp(1.0, -24) * largest;
}

double expect_backward_correct(const BackwardImpl& impl, const Problem& p, InputKind kind,
                               double tolerance, PSource p_source) {
  const uint64_t seed = seed_for(p);
  const AttentionInputs in = reference_inputs(p, kind, seed);
  BackwardOutputs got;
  try {
    got = run_backward(impl, p, in);
  } catch (const DeviceTooSmall& e) {
    [&] { GTEST_SKIP() << e.what(); }();
    return 0.0;
  }
  const Reference& ref = cached_reference(p, kind, seed, true);
  SCOPED_TRACE("chapter " + impl.chapter + " " + impl.variant + " backward on " + p.describe());
  const double cap = cap_for(p, kind, tolerance);
  const TensorErrors& b = ref.baseline;
  const ReferenceTensors& r = ref.tensors;
  const DType t = p.dtype, f32 = DType::Float32;
  double worst_err = check("O", got.O, r.O, b.O, t, t, cap);
  worst_err = std::max(worst_err, check("lse", got.lse, r.lse, b.lse, f32, t, cap));
  const double lse_term = p_source == PSource::kFromLse ? lse_recompute_error(r.lse) : 0.0;
  // A flash backward forms D from the stored O; the unfused baseline forms it the same way.
  // The term costs O(N²d) on the CPU, so it is computed only where dQ or dK would fail
  // without it (the verdict is the same: a tensor within the smaller limit is within this).
  const auto within = [&](const std::vector<float>& g, const std::vector<double>& ref, double b) {
    return verify("", g.data(), ref.data(), g.size(), tensor_limit(ref, b, t, cap, lse_term)).ok;
  };
  const bool need_o_term = p_source == PSource::kFromLse &&
                           !(within(got.dQ, r.dQ, b.dQ) && within(got.dK, r.dK, b.dK));
  const StoredOError o_term = need_o_term ? stored_o_error(p, in, r) : StoredOError{};
  worst_err = std::max(worst_err, check("dQ", got.dQ, r.dQ, b.dQ, t, t, cap, lse_term,
                                        kSamePrecisionFactor * o_term.dQ));
  worst_err = std::max(worst_err, check("dK", got.dK, r.dK, b.dK, t, t, cap, lse_term,
                                        kSamePrecisionFactor * o_term.dK));
  worst_err = std::max(worst_err, check("dV", got.dV, r.dV, b.dV, t, t, cap, lse_term));
  return worst_err;
}

}  // namespace ft::testing
