/// @file problem.hpp
/// @brief The shape of one attention problem and the FLOPs the FlashAttention papers count.
///
/// Tensors follow the layout contract (docs/contracts.md): Q, K, V, O, dQ, dK, dV are
/// `[batch, heads, seq_len, head_dim]` row-major and contiguous, of the problem's dtype; the
/// log-sum-exp `L` and `D = rowsum(dO∘O)` are `[batch, heads, seq_len]` float32.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "dtype.hpp"

namespace ft {

/// One attention problem: B·H independent heads of N queries attending to N keys of width d.
struct Problem {
  int batch = 1;      ///< B
  int heads = 1;      ///< H
  int seq_len = 1;    ///< N, the same for queries and keys
  int head_dim = 64;  ///< d
  bool causal = false;  ///< key j is visible to query i iff j <= i
  float scale = 0.f;    ///< softmax scale; 0 means the default 1/sqrt(d)
  DType dtype = DType::Float32;  ///< element type of Q, K, V, O and the gradients

  /// The largest N: tile counts and row indices stay far inside 32-bit ints.
  static constexpr int kMaxSeqLen = 1 << 24;
  /// The largest head dimension any implementation could hold on chip.
  static constexpr int kMaxHeadDim = 1024;
  /// The most query rows (B·H·N) a problem may have: the grids indexed by query rows or
  /// query tiles then fit CUDA's grid.x limit of 2^31 − 1, and every byte count a problem
  /// implies (at most B·H·N·N·4 < 2^57) stays far from 64-bit overflow. The grids that
  /// count tiles of the N×N grid (chapter 01's score kernel, chapter 06's) can still exceed
  /// grid.x for huge N; their launchers and workspace queries refuse those with a message.
  static constexpr int64_t kMaxRows = (int64_t(1) << 31) - 1;

  /// Throws ft::Unsupported (check.cuh) with a one-line message when the problem is not one
  /// any implementation can run: a size below 1 or past the limits above, a scale that is
  /// not finite. Every size below is then exact in 64 bits. The command line and the C API
  /// both call this before computing anything else.
  void validate() const;

  float softmax_scale() const { return scale != 0.f ? scale : 1.f / std::sqrt(float(head_dim)); }
  int64_t heads_total() const { return int64_t(batch) * heads; }          ///< B·H
  int64_t rows() const { return heads_total() * seq_len; }                ///< B·H·N
  int64_t elems() const { return rows() * head_dim; }                     ///< B·H·N·d
  int64_t grid_elems() const { return rows() * int64_t(seq_len); }       ///< B·H·N·N
  /// Bytes of one of Q, K, V, O (in the problem's dtype).
  size_t tensor_bytes() const { return size_t(elems()) * dtype_bytes(dtype); }
  /// Bytes of one float32 N×N grid per head (S or P of chapters 01–05).
  size_t grid_bytes() const { return size_t(grid_elems()) * sizeof(float); }

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
           (causal ? " causal" : " non-causal") +
           (dtype == DType::Float32 ? "" : std::string(" ") + dtype_name(dtype));
  }
};

/// ceil(a / b) for positive ints: how many tiles of b cover a.
constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

/// A problem from its shape, in the papers' order: make_problem(B, H, N, d, causal).
inline Problem make_problem(int batch, int heads, int seq_len, int head_dim, bool causal = false,
                            DType dtype = DType::Float32) {
  Problem p;
  p.dtype = dtype;
  p.batch = batch;
  p.heads = heads;
  p.seq_len = seq_len;
  p.head_dim = head_dim;
  p.causal = causal;
  return p;
}

}  // namespace ft
