/// @file testing.cu
#include "harness/testing.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "device/buffer.cuh"
#include "core/check.cuh"
#include "reference/precision.hpp"
#include "harness/verify.hpp"

namespace ft::testing {

Problem Shape::problem() const {
  Problem p;
  p.batch = 2;  // B·H = 6 > 1, with B ≠ H so a swapped stride shows
  p.heads_q = 3;
  p.heads_kv = heads_kv;
  p.len_q = seq_len;
  p.len_kv = len_kv > 0 ? len_kv : seq_len;
  p.head_dim = head_dim;
  p.causal = causal;
  p.align = align;
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
  const bool two_lengths = s.len_kv > 0 && s.len_kv != s.seq_len;
  return "N" + std::to_string(s.seq_len) + (two_lengths ? "_Nkv" + std::to_string(s.len_kv) : "") +
         (s.heads_kv != 3 ? "_Hkv" + std::to_string(s.heads_kv) : "") + "_d" +
         std::to_string(s.head_dim) + (s.causal ? "_causal" : "_full") +
         (s.causal && two_lengths && s.align == CausalAlign::BottomRight ? "_br" : "") +
         (s.dtype == DType::Float32 ? "" : std::string("_") + dtype_name(s.dtype));
}

std::vector<Shape> kv_shapes(const std::vector<int>& head_dims, DType dtype) {
  std::vector<Shape> shapes;
  // (N_q, N_kv): a few queries over a long cache (decoding's shape, with a ragged tail), a
  // cache shorter than the queries (bottom-right: the first rows see nothing), one query, and
  // cross-attention past a tile.
  const std::pair<int, int> lengths[] = {{17, 1000}, {1000, 17}, {1, 300}, {300, 1}, {200, 130}};
  for (int d : head_dims)
    for (auto [nq, nk] : lengths)
      for (bool causal : {false, true})
        for (CausalAlign a : {CausalAlign::TopLeft, CausalAlign::BottomRight}) {
          if (!causal && a == CausalAlign::BottomRight) continue;  // the same problem
          shapes.push_back({nq, d, causal, dtype, nk, 3, a});
        }
  // Grouped heads: 3 query heads over one key/value head (multi-query), at equal and at two
  // lengths, causal bottom-right as a cache needs.
  for (int d : head_dims)
    for (int n : {17, 1000}) {
      shapes.push_back({n, d, true, dtype, 0, 1});
      shapes.push_back({n, d, false, dtype, 0, 1});
      shapes.push_back({n, d, true, dtype, 2 * n + 5, 1, CausalAlign::BottomRight});
    }
  return shapes;
}

double allowed_error(double baseline, DType storage, double cap, bool ref_is_zero) {
  if (ref_is_zero || !std::isfinite(baseline)) return cap;
  return std::min(cap, std::max(error_floor(storage), kSamePrecisionFactor * baseline));
}

namespace {

/// A fixed seed per problem shape, so a failure reproduces, while different shapes draw
/// different numbers. (Not the dtype: a bf16 problem sees the float32 inputs, rounded.)
uint64_t seed_for(const Problem& p) {
  // The key/value side adds terms only where it differs from self-attention, so that every
  // self-attention shape keeps the seed it always had.
  const uint64_t kv = (p.same_lengths() ? 0 : 7919ull * uint64_t(p.len_kv)) +
                      (p.grouped() ? 31ull * uint64_t(p.heads_kv) : 0) +
                      (p.align == CausalAlign::BottomRight ? 3 : 0);
  return 1000003ull * uint64_t(p.len_q) + 101ull * uint64_t(p.head_dim) + (p.causal ? 7 : 0) + kv;
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

Layout test_layout(const Problem& p, ViewKind kind) {
  const int64_t d = p.head_dim;
  // Elements of gap: multiples of 8 (16 bytes of bf16/fp16), so rows stay aligned; and a
  // different gap for each tensor (Q, K, V, O, dO, dQ, dK, dV: 8, 16, ..., 64), so that a
  // kernel that stepped through one tensor with another's strides would fail the check.
  Strides s[8];
  for (int t = 0; t < 8; ++t) {
    const bool kv = t == 1 || t == 2 || t == 6 || t == 7;  // K V dK dV: [B, H_kv, N_kv, d]
    const int64_t H = kv ? p.heads_kv : p.heads_q, N = kv ? p.len_kv : p.len_q;
    const int64_t pad = 8 * (t + 1);
    if (kind == ViewKind::kProjection) {
      // q, k, v: views of one [B, N, H_q + 2·H_kv, d] product (when their lengths agree);
      // the rest [B, N, H, d].
      const bool fused = t < 3 && p.same_lengths();
      const int64_t row = (fused ? p.heads_q + 2 * p.heads_kv : H) * d + pad;
      s[t] = {N * row, d, row};
    } else {
      const int64_t head = N * (d + pad) + pad;
      s[t] = {H * head + pad, head, d + pad};
    }
  }
  return {s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]};
}

const char* view_name(ViewKind kind) {
  return kind == ViewKind::kProjection ? "projection" : "padded";
}

namespace {

/// A tensor of problem p laid out as `s` says (s null: contiguous): uploads dense values into
/// their places (the gaps NaN), downloads them back to dense, and counts the gaps that no
/// longer hold NaN.
class ViewTensor {
 public:
  /// A tensor of `heads` heads of `len` rows (the query side's or the key/value side's).
  ViewTensor(const Problem& p, int heads, int len, const Strides* s)
      : offsets_(offsets(p, heads, len, s)), span_(span(p, heads, len, s)),
        t_(p.dtype, size_t(span_)) {}
  void* get() const { return t_.get(); }
  void upload(const std::vector<float>& dense) {
    if (offsets_.empty()) return t_.upload(dense);
    std::vector<float> spread(size_t(span_), std::nanf(""));
    for (size_t i = 0; i < dense.size(); ++i) spread[size_t(offsets_[i])] = dense[i];
    t_.upload(spread);
  }
  void poison() { t_.poison(); }
  std::vector<float> download(int64_t* gap_writes) const {
    std::vector<float> spread = t_.download();
    if (offsets_.empty()) return spread;
    std::vector<float> dense(offsets_.size());
    std::vector<bool> inside(spread.size(), false);
    for (size_t i = 0; i < dense.size(); ++i) {
      dense[i] = spread[size_t(offsets_[i])];
      inside[size_t(offsets_[i])] = true;
    }
    for (size_t j = 0; j < spread.size(); ++j)
      if (!inside[j] && !std::isnan(spread[j])) ++*gap_writes;
    return dense;
  }

 private:
  /// Element (b, h, n, c)'s place, in the dense order; empty when contiguous.
  static std::vector<int64_t> offsets(const Problem& p, int heads, int len, const Strides* s) {
    std::vector<int64_t> at;
    if (s == nullptr) return at;
    at.reserve(size_t(int64_t(p.batch) * heads * len * p.head_dim));
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t n = 0; n < len; ++n)
          for (int64_t c = 0; c < p.head_dim; ++c) at.push_back(b * s->batch + h * s->head + n * s->row + c);
    return at;
  }
  /// Elements the buffer holds: up to the farthest element, and a tail of kTail more (where a
  /// store past the last row would land, and be counted).
  static int64_t span(const Problem& p, int heads, int len, const Strides* s) {
    constexpr int64_t kTail = 64;
    if (s == nullptr) return int64_t(p.batch) * heads * len * p.head_dim;
    return (p.batch - 1) * s->batch + (heads - 1) * s->head + (len - 1) * s->row +
           p.head_dim + kTail;
  }
  std::vector<int64_t> offsets_;
  int64_t span_;
  DeviceTensor t_;
};

}  // namespace

ForwardOutputs run_forward(const ForwardImpl& impl, const Problem& p, const AttentionInputs& in,
                           const Layout* layout) {
  const auto at = [&](const Strides& s) { return layout ? &s : nullptr; };
  const Layout l = layout_of(p, layout);
  const int Hq = p.heads_q, Nq = p.len_q, Hkv = p.heads_kv, Nk = p.len_kv;
  ViewTensor Q(p, Hq, Nq, at(l.Q)), K(p, Hkv, Nk, at(l.K)), V(p, Hkv, Nk, at(l.V)),
      O(p, Hq, Nq, at(l.O));
  DeviceBuffer<float> lse(size_t(p.rows()));
  DeviceBuffer<unsigned char> work(impl.workspace_bytes(p));
  Q.upload(in.Q);
  K.upload(in.K);
  V.upload(in.V);
  O.poison();
  lse.poison();
  work.poison();  // a kernel that accumulates into its workspace must clear it first
  impl.run(p, {Q.get(), K.get(), V.get(), O.get(), lse.get(), work.get(), layout}, 0);
  CUDA_CHECK(cudaDeviceSynchronize());
  ForwardOutputs out;
  out.O = O.download(&out.gap_writes);
  out.lse = lse.download();
  return out;
}

BackwardOutputs run_backward(const BackwardImpl& impl, const Problem& p,
                             const AttentionInputs& in, const Layout* layout) {
  const auto at = [&](const Strides& s) { return layout ? &s : nullptr; };
  const Layout l = layout_of(p, layout);
  const int Hq = p.heads_q, Nq = p.len_q, Hkv = p.heads_kv, Nk = p.len_kv;
  ViewTensor Q(p, Hq, Nq, at(l.Q)), K(p, Hkv, Nk, at(l.K)), V(p, Hkv, Nk, at(l.V)),
      O(p, Hq, Nq, at(l.O)), dO(p, Hq, Nq, at(l.dO)), dQ(p, Hq, Nq, at(l.dQ)),
      dK(p, Hkv, Nk, at(l.dK)), dV(p, Hkv, Nk, at(l.dV));
  DeviceBuffer<float> lse(size_t(p.rows()));
  DeviceBuffer<unsigned char> work(impl.workspace_bytes(p));
  Q.upload(in.Q);
  K.upload(in.K);
  V.upload(in.V);
  dO.upload(in.dO);
  for (auto* b : {&O, &dQ, &dK, &dV}) b->poison();
  lse.poison();
  // Poisoned once, before the forward: what a forward keeps there for its backward (chapter
  // 05's P) must survive, and everything else must be written before it is read, as it
  // would be in PyTorch's memory, which a freed tensor hands back unchanged.
  work.poison();
  impl.forward(p, {Q.get(), K.get(), V.get(), O.get(), lse.get(), work.get(), layout}, 0);
  impl.run(p, {Q.get(), K.get(), V.get(), O.get(), lse.get(), dO.get(), dQ.get(), dK.get(),
               dV.get(), work.get(), layout},
           0);
  CUDA_CHECK(cudaDeviceSynchronize());
  BackwardOutputs out;
  out.O = O.download(&out.gap_writes);
  out.lse = lse.download();
  out.dQ = dQ.download(&out.gap_writes);
  out.dK = dK.download(&out.gap_writes);
  out.dV = dV.download(&out.gap_writes);
  return out;
}

double expect_forward_correct(const ForwardImpl& impl, const Problem& p, InputKind kind,
                              double tolerance, const Layout* layout) {
  const uint64_t seed = seed_for(p);
  const AttentionInputs in = reference_inputs(p, kind, seed);
  ForwardOutputs got;
  try {
    got = run_forward(impl, p, in, layout);
  } catch (const DeviceTooSmall& e) {  // a GPU too small or too old: skip, saying why
    [&] { GTEST_SKIP() << e.what(); }();  // (GTEST_SKIP returns void: from the lambda)
    return 0.0;
  }
  const Reference& ref = cached_reference(p, kind, seed, false);
  SCOPED_TRACE("chapter " + impl.chapter + " " + impl.variant + " on " + p.describe());
  EXPECT_EQ(got.gap_writes, 0) << "elements outside O's view were written";
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
                               double tolerance, PSource p_source, const Layout* layout) {
  const uint64_t seed = seed_for(p);
  const AttentionInputs in = reference_inputs(p, kind, seed);
  BackwardOutputs got;
  try {
    got = run_backward(impl, p, in, layout);
  } catch (const DeviceTooSmall& e) {
    [&] { GTEST_SKIP() << e.what(); }();
    return 0.0;
  }
  const Reference& ref = cached_reference(p, kind, seed, true);
  SCOPED_TRACE("chapter " + impl.chapter + " " + impl.variant + " backward on " + p.describe());
  EXPECT_EQ(got.gap_writes, 0) << "elements outside the outputs' views were written";
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
