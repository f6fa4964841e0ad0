/// @file problem.hpp
/// @brief The shape of one attention problem and the FLOPs the FlashAttention papers count.
///
/// Tensors follow the layout contract (docs/contracts.md): Q, O, dQ, dO are
/// `[batch, heads_q, len_q, head_dim]`; K, V, dK, dV are `[batch, heads_kv, len_kv, head_dim]`;
/// row-major and contiguous, of the problem's dtype. The log-sum-exp `L` and
/// `D = rowsum(dO∘O)` are `[batch, heads_q, len_q]` float32.
///
/// Self-attention of one sequence with itself is the case where len_q = len_kv = N and
/// heads_q = heads_kv = H; chapters 01–06 compute only that case and say so.
///
/// Grouped heads: query head h reads key/value head h / (heads_q / heads_kv). With
/// heads_kv = heads_q that is ordinary multi-head attention, with heads_kv = 1 multi-query
/// attention, anything between grouped-query attention (Llama 3, Mistral).
///
/// The causal mask when the lengths differ: the N_q × N_kv grid of (query i, key j), and the
/// diagonal that separates what a query sees (on or left of it) from what it does not:
///
///       top-left (PyTorch SDPA's is_causal)       bottom-right (FlashAttention, a KV cache)
///       key j visible iff j ≤ i                   key j visible iff j ≤ i + N_kv − N_q
///
///            j →  0 1 2 3 4 5                           j →  0 1 2 3 4 5
///       i = 0     ■ · · · · ·                      i = 0     ■ ■ ■ ■ · ·
///       i = 1     ■ ■ · · · ·                      i = 1     ■ ■ ■ ■ ■ ·
///       i = 2     ■ ■ ■ · · ·                      i = 2     ■ ■ ■ ■ ■ ■
///       (N_q = 3, N_kv = 6)                        (the last query sees every key: the newest
///                                                   token of a sequence whose first N_kv − N_q
///                                                   tokens are already in the cache)
///
/// The two agree when N_q = N_kv. With bottom-right alignment and N_q > N_kv the first
/// N_q − N_kv queries see no key at all: their output row is 0, their log-sum-exp −∞ (the
/// log of an empty sum) and their dQ row 0, which is what FlashAttention returns for them
/// (its documentation: "if the row of the mask is all zero, the output will be zero").
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/dtype.hpp"

namespace ft {

/// Where the causal mask's diagonal sits when len_q ≠ len_kv (see the drawing above). The
/// values are the C API's `FT_CAUSAL_*` (flashtut.h).
enum class CausalAlign : int {
  TopLeft = 0,      ///< key j visible to query i iff j ≤ i (PyTorch SDPA's is_causal)
  BottomRight = 1,  ///< iff j ≤ i + len_kv − len_q (FlashAttention's; what decoding needs)
};

/// "top-left", "bottom-right": the names the command line and the messages use.
inline const char* causal_align_name(CausalAlign a) {
  return a == CausalAlign::TopLeft ? "top-left" : "bottom-right";
}

/// One attention problem: B sequences, each of heads_q query heads of len_q queries attending
/// to len_kv keys of one of heads_kv key/value heads, all of width d.
struct Problem {
  int batch = 1;       ///< B
  int heads_q = 1;     ///< H_q: query heads (and heads of O, lse)
  int heads_kv = 1;    ///< H_kv: key/value heads; heads_q is a multiple of it
  int len_q = 1;       ///< N_q: queries per sequence
  int len_kv = 1;      ///< N_kv: keys (and values) per sequence
  int head_dim = 64;   ///< d
  bool causal = false;  ///< apply the causal mask, aligned as `align` says
  CausalAlign align = CausalAlign::TopLeft;  ///< matters only when causal and len_q ≠ len_kv
  float scale = 0.f;    ///< softmax scale; 0 means the default 1/sqrt(d)
  DType dtype = DType::Float32;  ///< element type of Q, K, V, O and the gradients

  /// The largest length: tile counts and row indices stay far inside 32-bit ints.
  static constexpr int kMaxSeqLen = 1 << 24;
  /// The largest head dimension any implementation could hold on chip.
  static constexpr int kMaxHeadDim = 1024;
  /// The most rows (B·H·N) a tensor of a problem may have: the grids indexed by query rows or
  /// query tiles then fit CUDA's grid.x limit of 2^31 − 1, and every byte count a problem
  /// implies (at most B·H·N_q·N_kv·4 < 2^57) stays far from 64-bit overflow. The grids that
  /// count tiles of the N×N grid (chapter 01's score kernel, chapter 06's) can still exceed
  /// grid.x for huge N; their launchers and workspace queries refuse those with a message.
  static constexpr int64_t kMaxRows = (int64_t(1) << 31) - 1;

  /// Throws ft::Unsupported (check.cuh) with a one-line message when the problem is not one
  /// any implementation can run: a size below 1 or past the limits above, heads_q not a
  /// multiple of heads_kv, a scale that is not finite or negative. Every size below is then
  /// exact in 64 bits. The command line and the C API both call this before anything else.
  void validate() const;

  float softmax_scale() const { return scale != 0.f ? scale : 1.f / std::sqrt(float(head_dim)); }

  /// Self-attention's shape: one length and one head count (chapters 01–06 compute only it).
  bool same_lengths() const { return len_q == len_kv; }
  bool grouped() const { return heads_kv != heads_q; }
  /// Query heads per key/value head (1 without grouping).
  int group() const { return heads_q / heads_kv; }
  /// The key/value head that query head bh = b·H_q + h reads: b·H_kv + h / group, which is
  /// bh / group because H_q = group·H_kv.
  int64_t kv_head(int64_t bh) const { return bh / group(); }

  /// How far right the causal diagonal is shifted: key j is visible to query i iff
  /// j ≤ i + causal_offset(). 0 top-left (and whenever the lengths agree), len_kv − len_q
  /// bottom-right.
  int causal_offset() const {
    return align == CausalAlign::BottomRight ? len_kv - len_q : 0;
  }
  /// Keys query row i sees: the prefix [0, visible_keys(i)) of its head's keys (0 for a row
  /// that sees none: bottom-right with len_q > len_kv).
  int visible_keys(int i) const {
    if (!causal) return len_kv;
    return int(std::clamp<int64_t>(int64_t(i) + causal_offset() + 1, 0, len_kv));
  }

  int64_t heads_total() const { return int64_t(batch) * heads_q; }      ///< B·H_q
  int64_t kv_heads_total() const { return int64_t(batch) * heads_kv; }  ///< B·H_kv
  int64_t rows() const { return heads_total() * len_q; }              ///< query rows, B·H_q·N_q
  int64_t kv_rows() const { return kv_heads_total() * len_kv; }       ///< key rows, B·H_kv·N_kv
  int64_t elems() const { return rows() * head_dim; }                 ///< of Q (O, dO, dQ)
  int64_t kv_elems() const { return kv_rows() * head_dim; }           ///< of K (V, dK, dV)
  int64_t grid_elems() const { return rows() * int64_t(len_kv); }    ///< B·H_q·N_q·N_kv
  /// Bytes of one of Q, O, dO, dQ (in the problem's dtype).
  size_t q_bytes() const { return size_t(elems()) * dtype_bytes(dtype); }
  /// Bytes of one of K, V, dK, dV.
  size_t kv_bytes() const { return size_t(kv_elems()) * dtype_bytes(dtype); }
  /// Bytes of one float32 N_q×N_kv grid per head (S or P of chapters 01–05).
  size_t grid_bytes() const { return size_t(grid_elems()) * sizeof(float); }

  /// The (query, key) pairs of one head the FLOPs count: N_q·N_kv, or under the causal mask
  /// the area of the visible region as the papers count it, N²/2 for equal lengths (they
  /// count half the grid, not N(N+1)/2). For unequal lengths the same area: the integral over
  /// the queries of how many keys each sees, clamp(i + offset, 0, N_kv) for i in [0, N_q].
  double attended_pairs() const {
    const double nq = len_q, nk = len_kv;
    if (!causal) return nq * nk;
    const double off = causal_offset();
    // ∫_0^nq clamp(x + off, 0, nk) dx: zero until x = −off, a ramp until x = nk − off, then nk.
    const double a = std::clamp(-off, 0.0, nq), b = std::clamp(nk - off, 0.0, nq);
    const double ramp = ((b + off) * (b + off) - (a + off) * (a + off)) / 2;
    return ramp + (nq - b) * nk;
  }
  /// Forward FLOPs as the FlashAttention papers count them: two matrix products of
  /// 2·d FLOPs per (query, key) pair per head, 4·B·H_q·N_q·N_kv·d; half of that causal
  /// (for equal lengths; attended_pairs() otherwise).
  double forward_flops() const { return 4.0 * double(heads_total()) * attended_pairs() * head_dim; }
  /// Backward FLOPs: 2.5× the forward (five matrix products instead of two).
  double backward_flops() const { return 2.5 * forward_flops(); }

  /// "B=4 H=32 N=4096 d=64 causal bf16"; with two lengths or grouped heads
  /// "B=1 Hq=32 Hkv=8 Nq=4 Nkv=8192 d=128 causal(bottom-right) bf16".
  std::string describe() const;
};

/// ceil(a / b) for positive ints: how many tiles of b cover a.
constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

/// A self-attention problem from its shape, in the papers' order: make_problem(B, H, N, d,
/// causal): len_q = len_kv = N, heads_q = heads_kv = H.
inline Problem make_problem(int batch, int heads, int seq_len, int head_dim, bool causal = false,
                            DType dtype = DType::Float32) {
  Problem p;
  p.dtype = dtype;
  p.batch = batch;
  p.heads_q = p.heads_kv = heads;
  p.len_q = p.len_kv = seq_len;
  p.head_dim = head_dim;
  p.causal = causal;
  return p;
}

/// The same problem with other key/value lengths and heads (cross-attention, a KV cache,
/// grouped-query heads): with_kv(make_problem(1, 32, 4, 128, true), 8192, 8,
/// CausalAlign::BottomRight) is 4 new tokens of 32 query heads over a cache of 8192 tokens of
/// 8 key/value heads.
inline Problem with_kv(Problem p, int len_kv, int heads_kv,
                       CausalAlign align = CausalAlign::TopLeft) {
  p.len_kv = len_kv;
  p.heads_kv = heads_kv;
  p.align = align;
  return p;
}

}  // namespace ft
