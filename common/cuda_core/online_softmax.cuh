/// @file online_softmax.cuh
/// @brief The online-softmax update (chapter 03's idea), one `__host__ __device__` piece
/// that chapters 03, 04 and 05 share and that the CPU tests check exactly.
///
/// A softmax over a row needs its maximum `m` (for safety: exp of a large score overflows)
/// and the sum `l` of exp(x - m). Read the row once and keep both *running*: when a larger
/// score arrives, the sum collected so far was taken relative to the old maximum, so scale
/// it by exp(m_old - m_new). Two partial states merge the same way, in any order, which is
/// what lets a block of threads (or a stream of K/V tiles) split a row and combine.
///
/// Units: the scores x here are in base 2, x = s · scale · log2(e), so that every exp is
/// the hardware's `exp2` (one MUFU instruction) with the softmax scale folded into one
/// multiply, as FlashAttention does. online_lse() converts back to natural log units.
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define FT_HD __host__ __device__ __forceinline__
#else
#define FT_HD inline
#endif

namespace ft {

constexpr float kLog2e = 1.4426950408889634f;  ///< log2(e): e^s = 2^(s·log2 e)
constexpr float kLn2 = 0.6931471805599453f;     ///< ln(2): converts log2 back to natural log

/// Running state of a softmax over the scores seen so far (base-2 units).
struct OnlineSoftmax {
  float m;  ///< running maximum of the scores, -inf before the first one
  float l;  ///< running sum of 2^(x - m) over the scores seen
};

/// The state before any score: max -inf, sum 0.
FT_HD OnlineSoftmax online_softmax_empty() { return {-INFINITY, 0.f}; }

/// The value to subtract inside exp2. While every score seen is -inf (a row fully masked so
/// far) m is -inf, and x - m would be (-inf) - (-inf) = NaN; subtracting 0 instead gives
/// exp2(-inf) = 0, the right answer, and never NaN.
FT_HD float online_exp_base(float m) { return m == -INFINITY ? 0.f : m; }

/// Folds one score into the state (the element-at-a-time form of the update).
FT_HD void online_push(OnlineSoftmax& s, float x) {
  const float m_new = fmaxf(s.m, x);
  const float base = online_exp_base(m_new);
  s.l = s.l * exp2f(s.m - base) + exp2f(x - base);
  s.m = m_new;
}

/// Starts a block of scores whose maximum is `block_max` (the tile-at-a-time form).
/// Raises m, rescales l, and returns alpha = 2^(m_old - m_new): the factor by which
/// everything else accumulated against the old maximum (the output row O) must be scaled.
/// The caller then adds 2^(x - online_exp_base(s.m)) of each score of the block to s.l.
FT_HD float online_rescale(OnlineSoftmax& s, float block_max) {
  const float m_new = fmaxf(s.m, block_max);
  const float alpha = exp2f(s.m - online_exp_base(m_new));
  s.m = m_new;
  s.l *= alpha;
  return alpha;
}

/// Combines two partial states of one row (of disjoint score sets). Associative and
/// commutative up to rounding, so a tree reduction across threads may use it.
FT_HD OnlineSoftmax online_merge(OnlineSoftmax a, OnlineSoftmax b) {
  const float m = fmaxf(a.m, b.m);
  const float base = online_exp_base(m);
  return {m, a.l * exp2f(a.m - base) + b.l * exp2f(b.m - base)};
}

/// The row's log-sum-exp in natural units, ln Σ e^(s·scale): what the forward saves for
/// the backward pass. -inf for a row with no visible score.
FT_HD float online_lse(OnlineSoftmax s) { return (s.m + log2f(s.l)) * kLn2; }

}  // namespace ft
