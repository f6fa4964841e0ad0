/// @file thread_per_row.cuh
/// @brief Chapter 04's first fused kernel, variant `simple`: one thread per query row.
///
/// The idea of the chapter, plainly: a block owns kSimpleBr query rows of one head, thread t
/// owns row q0 + t; K/V tiles of kSimpleBc rows go through shared memory, the row's scores
/// of one tile and its output row live in the thread's registers, and chapter 03's online
/// softmax folds each tile into m, l and O. S and P never leave the chip.
/// What changed from chapter 03: one kernel instead of a score grid in device memory.
/// The next variant, `fast` (register_tiles.cuh), keeps the algorithm and gives each thread
/// a register micro-tile instead of a whole row: `diff thread_per_row.cuh register_tiles.cuh`.
///
/// Run it: ./build/chapters/04_fused_forward/ch04_fused_forward --variant simple
/// (fused_forward.cu launches it, for d = 32, 64 and 128; this file is included there only.)
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_core/online_softmax.cuh"

namespace ch04 {
namespace {

// Query rows per block = threads per block: 4 warps; at N = 4096, B·H = 128 that is 4096
// blocks, 31 per SM: every SM has work (see the README for a design that had too few).
constexpr int kSimpleBr = 128;
// Keys per K/V tile: a row's 32 scores of one tile live in registers (s[32]), next to its
// output row (o[d]): 32 + 128 floats at d = 128 still fit in a thread's 255 registers.
constexpr int kSimpleBc = 32;

template <int D>
constexpr size_t simple_smem_bytes() {
  return sizeof(float) * (D * kSimpleBr + 2 * kSimpleBc * D);  // Qᵀ, K tile, V tile
}

template <int D>
__global__ void __launch_bounds__(kSimpleBr)
    fused_forward_simple_kernel(const float* __restrict__ Q, const float* __restrict__ K,
                                const float* __restrict__ V, float* __restrict__ O,
                                float* __restrict__ lse, int N, int num_q_tiles, bool causal,
                                float scale_log2) {
  constexpr int Br = kSimpleBr, Bc = kSimpleBc;
  extern __shared__ float4 smem_simple[];  // float4: 16-byte aligned
  float* Qt = reinterpret_cast<float*>(smem_simple);  // [D][Br] queries: thread t owns column t
  float* Ks = Qt + D * Br;                             // [Bc][D] one tile of keys
  float* Vs = Ks + Bc * D;                             // [Bc][D] and of values

  const int t = threadIdx.x;
  // Last query tile first: under the causal mask it has the most keys (see the fast kernel).
  const int q0 = (num_q_tiles - 1 - int(blockIdx.x % num_q_tiles)) * Br;
  const int64_t head = blockIdx.x / num_q_tiles;  // b·H + h
  Q += head * N * D, K += head * N * D, V += head * N * D, O += head * N * D, lse += head * N;
  const int row = q0 + t;  // this thread's query

  // The query row, with scale·log2(e) folded in so that q·k comes out in base-2 units. It
  // sits in shared memory, not registers, to leave the registers to s[] and o[]; only this
  // thread reads column t, and a warp reads 32 consecutive floats: no bank conflicts.
  for (int k = 0; k < D; ++k) Qt[k * Br + t] = row < N ? Q[int64_t(row) * D + k] * scale_log2 : 0.f;

  float o[D];
#pragma unroll
  for (int c = 0; c < D; ++c) o[c] = 0.f;
  ft::OnlineSoftmax st = ft::online_softmax_empty();

  const int kv_end = causal ? min(N, q0 + Br) : N;  // causal: no key past the last query
  for (int kv0 = 0; kv0 < kv_end; kv0 += Bc) {
    __syncthreads();  // every thread is done with the previous tile
    for (int i = t; i < Bc * D; i += Br) {  // coalesced: consecutive threads, consecutive floats
      const int j = i / D;
      const bool inside = kv0 + j < N;  // rows past N: zeros (never NaN times a zero weight)
      Ks[i] = inside ? K[int64_t(kv0) * D + i] : 0.f;
      Vs[i] = inside ? V[int64_t(kv0) * D + i] : 0.f;
    }
    __syncthreads();

    // Scores of this row against the tile's Bc keys. k outermost: each q value is read once
    // and used Bc times; Ks[j][k] is the same address for every thread (a broadcast).
    float s[Bc];
#pragma unroll
    for (int j = 0; j < Bc; ++j) s[j] = 0.f;
    for (int k = 0; k < D; ++k) {
      const float q = Qt[k * Br + t];
#pragma unroll
      for (int j = 0; j < Bc; ++j) s[j] = fmaf(q, Ks[j * D + k], s[j]);
    }

    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < Bc; ++j) {
      if (kv0 + j >= N || (causal && kv0 + j > row)) s[j] = -INFINITY;  // masked: weight 0
      tile_max = fmaxf(tile_max, s[j]);
    }
    // Online softmax: raise m, rescale l and the output row by alpha = 2^(m_old − m_new).
    const float alpha = ft::online_rescale(st, tile_max);
    const float base = ft::online_exp_base(st.m);
#pragma unroll
    for (int c = 0; c < D; ++c) o[c] *= alpha;
#pragma unroll
    for (int j = 0; j < Bc; ++j) {
      const float p = exp2f(s[j] - base);
      st.l += p;
#pragma unroll
      for (int c = 0; c < D; ++c) o[c] = fmaf(p, Vs[j * D + c], o[c]);
    }
  }

  if (row < N) {  // the division by l, once per row, at the end
    const float inv_l = 1.f / st.l;
#pragma unroll
    for (int c = 0; c < D; ++c) O[int64_t(row) * D + c] = o[c] * inv_l;
    lse[row] = ft::online_lse(st);
  }
}

}  // namespace
}  // namespace ch04
