/// @file inputs.cpp
#include "reference/inputs.hpp"

#include <cmath>

namespace ft {

namespace {
/// splitmix64: a 64-bit mixing function; applied to a counter it gives independent-looking
/// values that depend only on (seed, index), so any element can be computed on its own.
uint64_t splitmix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
}  // namespace

std::vector<float> random_uniform(size_t n, uint64_t seed, float lo, float hi) {
  std::vector<float> out(n);
  const uint64_t base = splitmix64(seed);
  // 24 random bits: exactly representable in a float's mantissa, so u is in [0, 1).
  const double to_unit = 1.0 / double(1u << 24);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < int64_t(n); ++i) {
    const uint64_t bits = splitmix64(base + 0x9E3779B97F4A7C15ull * uint64_t(i + 1)) >> 40;
    out[i] = float(lo + (hi - lo) * (double(bits) * to_unit));
  }
  return out;
}

float large_score_factor(int head_dim) {
  // q·k with entries uniform in [-a, a] has standard deviation a²·sqrt(d)/3 (each product
  // has variance a⁴/9); its largest value over millions of pairs is about 4 of those.
  // Setting a²·4·sqrt(d)/3 = 1e4 gives a² = 7500/sqrt(d).
  return float(std::sqrt(7500.0 / std::sqrt(double(head_dim))));
}

AttentionInputs make_inputs(const Problem& p, InputKind kind, uint64_t seed) {
  const size_t n = size_t(p.elems()), kv = size_t(p.kv_elems());  // Q and dO; K and V
  AttentionInputs in;
  // Four streams from one seed; the odd multiplier keeps them apart for nearby seeds.
  const uint64_t s = seed * 0x2545F4914F6CDD1Dull;
  const float a = kind == InputKind::LargeScores ? large_score_factor(p.head_dim) : 1.f;
  in.Q = random_uniform(n, s + 1, -a, a);
  in.K = random_uniform(kv, s + 2, -a, a);
  in.V = random_uniform(kv, s + 3);
  in.dO = random_uniform(n, s + 4);
  // Half-precision problems compute on the rounded values: round here, once, so that the
  // kernels and the float64 reference see exactly the same numbers.
  if (p.dtype != DType::Float32)
    for (auto* t : {&in.Q, &in.K, &in.V, &in.dO})
      for (float& x : *t) x = round_to(p.dtype, x);
  return in;
}

}  // namespace ft
