/// @file inputs.hpp
/// @brief Seeded random inputs. Never zeros: zeros hide unwritten outputs and wrong
/// indexing. Same seed, same numbers, on every machine.
#pragma once

#include <cstdint>
#include <vector>

#include "core/problem.hpp"

namespace ft {

enum class InputKind {
  Uniform,      ///< every element uniform in [-1, 1)
  LargeScores,  ///< Q and K scaled so raw scores q·k reach about ±1e4: overflow bait
};

/// n floats uniform in [lo, hi), from a counter-based generator (splitmix64) so that the
/// result depends only on (seed, n, lo, hi).
std::vector<float> random_uniform(size_t n, uint64_t seed, float lo = -1.f, float hi = 1.f);

/// The inputs of one attention problem (forward and backward): Q and dO of the query side
/// (B·H_q·N_q·d), K and V of the key/value side (B·H_kv·N_kv·d).
struct AttentionInputs {
  std::vector<float> Q, K, V, dO;
};

/// Q, K, V and dO for `p`, rounded to p.dtype when that is bf16 or fp16 (so the float64
/// reference and the kernels compute on the same numbers). LargeScores multiplies Q and K by a factor chosen so that the
/// largest |q·k| is about 1e4 before the softmax scale: exp of such scores overflows float32
/// unless the maximum is subtracted first, which is what this input checks.
AttentionInputs make_inputs(const Problem& p, InputKind kind, uint64_t seed);

/// The factor LargeScores applies to Q and K for head dimension d.
float large_score_factor(int head_dim);

}  // namespace ft
