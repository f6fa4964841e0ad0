/// @file split_kv.hpp
/// @brief Split-KV decoding's merge, in float64: the results of one query row over disjoint
/// sets of keys combined into its result over all of them.
///
/// Decoding has one (or a few) query rows per sequence and head against a long cache, so a
/// block per (sequence, head) leaves most of the GPU idle. Split-KV gives each block a range
/// of keys instead; each computes, for its keys alone, the normalized output O_s and the
/// log-sum-exp lse_s of its scores. Chapter 03's online softmax says how to combine them:
///
///     lse = log Σ_s exp(lse_s)          O = Σ_s exp(lse_s − lse) · O_s
///
/// (the weights exp(lse_s − lse) are each split's share of the row's softmax mass, and sum
/// to 1). A split whose keys are all masked has lse_s = −∞ and weight 0; a row whose every
/// split is empty keeps O = 0 and lse = −∞, the contract's rule for a row that sees no key.
#pragma once

#include <cmath>

namespace ft {

/// Merges `splits` partial results of one query row: o_parts is [splits][d] (each split's
/// normalized output), lse_parts [splits] (natural log); writes O[d] and lse.
inline void merge_splits(const double* o_parts, const double* lse_parts, int splits, int d, double* o,
                         double* lse) {
  double m = -INFINITY;
  for (int s = 0; s < splits; ++s) m = std::fmax(m, lse_parts[s]);
  for (int c = 0; c < d; ++c) o[c] = 0.0;
  if (m == -INFINITY) {  // no split saw a key
    *lse = -INFINITY;
    return;
  }
  double sum = 0.0;
  for (int s = 0; s < splits; ++s) sum += std::exp(lse_parts[s] - m);
  *lse = m + std::log(sum);
  for (int s = 0; s < splits; ++s) {
    const double w = std::exp(lse_parts[s] - *lse);
    for (int c = 0; c < d; ++c) o[c] += w * o_parts[s * d + c];
  }
}

}  // namespace ft
