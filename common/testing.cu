/// @file testing.cu
#include "testing.hpp"

#include <map>

#include "buffer.cuh"
#include "check.cuh"
#include "reference.hpp"
#include "verify.hpp"

namespace ft::testing {

Problem Shape::problem() const {
  Problem p;
  p.batch = 2;  // B·H = 6 > 1, with B ≠ H so a swapped stride shows
  p.heads = 3;
  p.seq_len = seq_len;
  p.head_dim = head_dim;
  p.causal = causal;
  return p;
}

std::vector<Shape> standard_shapes(const std::vector<int>& head_dims) {
  std::vector<Shape> shapes;
  for (int n : {1, 17, 64, 1000, 2048})
    for (int d : head_dims)
      for (bool causal : {false, true}) shapes.push_back({n, d, causal});
  return shapes;
}

std::string shape_name(const Shape& s) {
  return "N" + std::to_string(s.seq_len) + "_d" + std::to_string(s.head_dim) +
         (s.causal ? "_causal" : "_full");
}

namespace {

/// The float64 reference of a whole problem, kept for the test binary's lifetime so the
/// implementations of one chapter (and the two backwards) share one computation.
struct Reference {
  std::vector<double> O, lse, dQ, dK, dV;
};

const Reference& reference(const Problem& p, InputKind kind, uint64_t seed,
                           const AttentionInputs& in, bool backward) {
  static std::map<std::string, Reference> cache;
  const std::string key = p.describe() + "/" + std::to_string(int(kind)) + "/" +
                          std::to_string(seed) + (backward ? "/bwd" : "/fwd");
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  Reference r;
  r.O.resize(size_t(p.elems()));
  r.lse.resize(size_t(p.rows()));
  reference_forward(p, in.Q.data(), in.K.data(), in.V.data(), r.O.data(), r.lse.data());
  if (backward) {
    r.dQ.resize(size_t(p.elems()));
    r.dK.resize(size_t(p.elems()));
    r.dV.resize(size_t(p.elems()));
    reference_backward(p, in.Q.data(), in.K.data(), in.V.data(), in.dO.data(), r.dQ.data(),
                       r.dK.data(), r.dV.data());
  }
  return cache.emplace(key, std::move(r)).first->second;
}

/// A fixed seed per problem shape, so a failure reproduces, while different shapes draw
/// different numbers.
uint64_t seed_for(const Problem& p) {
  return 1000003ull * uint64_t(p.seq_len) + 101ull * uint64_t(p.head_dim) + (p.causal ? 7 : 0);
}

double check(const char* name, const std::vector<float>& got, const std::vector<double>& ref,
             double tolerance) {
  const VerifyResult v = verify(name, got.data(), ref.data(), got.size(), tolerance);
  EXPECT_TRUE(v.ok) << v.message;
  return v.rel_l2;
}

}  // namespace

ForwardOutputs run_forward(const ForwardImpl& impl, const Problem& p, const AttentionInputs& in) {
  const size_t n = size_t(p.elems());
  DeviceBuffer<float> Q(n), K(n), V(n), O(n), lse(size_t(p.rows()));
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
  DeviceBuffer<float> Q(n), K(n), V(n), O(n), lse(size_t(p.rows())), dO(n), dQ(n), dK(n), dV(n);
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
  const AttentionInputs in = make_inputs(p, kind, seed);
  const ForwardOutputs got = run_forward(impl, p, in);
  const Reference& ref = reference(p, kind, seed, in, false);
  SCOPED_TRACE("chapter " + impl.chapter + " " + impl.variant + " on " + p.describe());
  return std::max(check("O", got.O, ref.O, tolerance), check("lse", got.lse, ref.lse, tolerance));
}

double expect_backward_correct(const BackwardImpl& impl, const Problem& p, InputKind kind,
                               double tolerance) {
  const uint64_t seed = seed_for(p);
  const AttentionInputs in = make_inputs(p, kind, seed);
  const BackwardOutputs got = run_backward(impl, p, in);
  const Reference& ref = reference(p, kind, seed, in, true);
  SCOPED_TRACE("chapter " + impl.chapter + " " + impl.variant + " backward on " + p.describe());
  double worst_err = check("O", got.O, ref.O, tolerance);
  worst_err = std::max(worst_err, check("lse", got.lse, ref.lse, tolerance));
  worst_err = std::max(worst_err, check("dQ", got.dQ, ref.dQ, tolerance));
  worst_err = std::max(worst_err, check("dK", got.dK, ref.dK, tolerance));
  worst_err = std::max(worst_err, check("dV", got.dV, ref.dV, tolerance));
  return worst_err;
}

}  // namespace ft::testing
