/// @file problem.hpp
/// @brief The shape of one attention problem and the FLOPs the FlashAttention papers count.
///
/// Tensors follow the layout contract of the design guide: Q, K, V, O, dQ, dK, dV are
/// `[batch, heads, seq_len, head_dim]` row-major and contiguous; the log-sum-exp `L` and
/// `D = rowsum(dO∘O)` are `[batch, heads, seq_len]`, all float32.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ft {

/// One attention problem: B·H independent heads of N queries attending to N keys of width d.
struct Problem {
  int batch = 1;      ///< B
  int heads = 1;      ///< H
  int seq_len = 1;    ///< N, the same for queries and keys
  int head_dim = 64;  ///< d
  bool causal = false;  ///< key j is visible to query i iff j <= i
  float scale = 0.f;    ///< softmax scale; 0 means the default 1/sqrt(d)

  float softmax_scale() const { return scale != 0.f ? scale : 1.f / std::sqrt(float(head_dim)); }
  int64_t heads_total() const { return int64_t(batch) * heads; }          ///< B·H
  int64_t rows() const { return heads_total() * seq_len; }                ///< B·H·N
  int64_t elems() const { return rows() * head_dim; }                     ///< B·H·N·d
  int64_t grid_elems() const { return rows() * int64_t(seq_len); }       ///< B·H·N·N
  size_t tensor_bytes() const { return size_t(elems()) * sizeof(float); }  ///< one of Q,K,V,O
  size_t grid_bytes() const { return size_t(grid_elems()) * sizeof(float); }  ///< one N×N grid per head

  /// Forward FLOPs as the FlashAttention papers count them: two matrix products of
  /// 2·N·N·d each per head, so 4·B·H·N²·d; half of that with the causal mask.
  double forward_flops() const {
    double f = 4.0 * double(heads_total()) * double(seq_len) * double(seq_len) * head_dim;
    return causal ? f / 2 : f;
  }
  /// Backward FLOPs: 2.5× the forward (five matrix products instead of two).
  double backward_flops() const { return 2.5 * forward_flops(); }

  std::string describe() const {
    return "B=" + std::to_string(batch) + " H=" + std::to_string(heads) + " N=" +
           std::to_string(seq_len) + " d=" + std::to_string(head_dim) +
           (causal ? " causal" : " non-causal");
  }
};

/// A problem from its shape, in the papers' order: make_problem(B, H, N, d, causal).
inline Problem make_problem(int batch, int heads, int seq_len, int head_dim, bool causal = false) {
  Problem p;
  p.batch = batch;
  p.heads = heads;
  p.seq_len = seq_len;
  p.head_dim = head_dim;
  p.causal = causal;
  return p;
}

}  // namespace ft
