/// @file register_tiles.cuh
/// @brief Chapter 04's second fused kernel, variants `fast` and `fast_<Br>x<Bc>`: the same
/// algorithm as `simple` (thread_per_row.cuh), register-tiled like an SGEMM.
///
/// What changed from `simple`: a thread no longer owns a whole query row. A block of
/// TR × TC threads computes a Br × Bc score tile and a Br × d output tile, thread (tr, tc)
/// an 8-row micro-tile of each (the same rows in S and O, so m and l stay with the row's TC
/// threads, reduced with shuffles), so that every value loaded from shared memory feeds
/// several FMAs from registers (cuda_core/tile_ops.cuh: Split, mma_tile). Q and K are stored
/// transposed, and P goes through shared memory (transposed) to feed O += P·V.
///
/// Run it: ./build/chapters/04_fused_forward/ch04_fused_forward --variant fast
/// (fused_forward.cu launches it at the tile shapes it registers; this file is included there
/// only.)
#pragma once

#include <cuda_runtime.h>

#include "core/limits.hpp"  // ft::kMaxSmemPerBlock
#include <cstdint>

#include "cuda_core/tile_ops.cuh"
#include "cuda_core/online_softmax.cuh"

namespace ch04 {

// The register-tiling pieces (common/cuda_core/tile_ops.cuh), and 2^x in one instruction
// (MUFU.EX2: common/cuda_core/exp2.cuh says why not exp2f).
using ft::exp2_ftz;
using ft::cuda_core::load_tile;
using ft::cuda_core::load_tile_transposed;
using ft::cuda_core::mma_tile;
using ft::cuda_core::row_max;
using ft::cuda_core::row_sum;
using ft::cuda_core::Split;
using ft::cuda_core::store_fragment;
using ft::cuda_core::store_tile_transposed;
namespace {

/// The fast kernel's tile shape. Template parameters, so that every loop bound and every
/// register array size is a compile-time constant.
template <int D_, int Br_, int Bc_, int TC_>
struct FastTiles {
  static constexpr int D = D_;    ///< head dimension
  static constexpr int Br = Br_;  ///< query rows per block
  static constexpr int Bc = Bc_;  ///< keys per K/V tile
  static constexpr int TC = TC_;  ///< threads that share a row (a power of two ≤ 32)
  /// Rows per thread: two runs of 4 (two float4 reads). With 8 columns that is an 8×8
  /// outer product, 64 FMAs for 16 floats read from shared memory.
  static constexpr int kRowsPerThread = 8;
  static constexpr int TR = Br / kRowsPerThread;  ///< threads down the rows
  static constexpr int kThreads = TR * TC;
  using Rows = Split<Br, TR>;   ///< a thread's rows, the same in S and O: m, l stay private
  using SCols = Split<Bc, TC>;  ///< its columns (keys) of the score tile S
  using OCols = Split<D, TC>;   ///< its columns of the output tile O
  /// Pᵀ is written one column of S at a time, so lanes holding different columns write
  /// different rows of Pᵀ; with a row stride of exactly Br (a multiple of 32 floats) those
  /// rows all start on bank 0 and the stores conflict. 4 more floats shift each row by 4
  /// banks, and keep it 16-byte aligned for the float4 stores.
  static constexpr int kPadP = 4;
  static constexpr int kLdP = Br + kPadP;
  static constexpr size_t kSmemBytes = sizeof(float) * (D * Br + D * Bc + Bc * D + Bc * kLdP);
  static_assert(Br % kRowsPerThread == 0 && D % 4 == 0, "whole runs of 4");
  static_assert(kThreads % 32 == 0, "whole warps: the row shuffles use every lane");
  static_assert(kSmemBytes <= ft::kMaxSmemPerBlock, "at most 227 KB of shared memory per block");
};

template <class T>
__global__ void __launch_bounds__(T::kThreads)
    fused_forward_kernel(const float* __restrict__ Q, const float* __restrict__ K,
                         const float* __restrict__ V, float* __restrict__ O,
                         float* __restrict__ lse, int N, int num_q_tiles, bool causal,
                         float scale_log2) {
  constexpr int D = T::D, Br = T::Br, Bc = T::Bc, TC = T::TC;
  using Rows = typename T::Rows;
  using SCols = typename T::SCols;
  using OCols = typename T::OCols;
  constexpr int kRows = Rows::kCount, kSCols = SCols::kCount, kOCols = OCols::kCount;

  extern __shared__ float4 smem_fast[];  // float4: 16-byte aligned for the vector reads
  float* Qt = reinterpret_cast<float*>(smem_fast);  // [D][Br]  Q tile, transposed, scaled
  float* Kt = Qt + D * Br;                          // [D][Bc]  K tile, transposed
  float* Vs = Kt + D * Bc;                          // [Bc][D]  V tile, as stored
  float* Pt = Vs + Bc * D;                          // [Bc][kLdP] probabilities, transposed

  const int tc = threadIdx.x % TC, tr = threadIdx.x / TC;
  // Last query tile first: under the causal mask it has the most key tiles, and starting the
  // longest blocks first keeps the last wave short. Query tiles are the fastest-varying
  // index, so the blocks running together share one head's K and V in L2.
  const int q0 = (num_q_tiles - 1 - int(blockIdx.x % num_q_tiles)) * Br;
  const int64_t head = blockIdx.x / num_q_tiles;  // b·H + h
  Q += head * N * D, K += head * N * D, V += head * N * D, O += head * N * D, lse += head * N;

  // Q is read once and stays on chip; scale·log2(e) is folded in, so that S = Q·Kᵀ comes out
  // in base-2 units and every exp is one exp2.
  load_tile_transposed<Br, D, T::kThreads>(Qt, Q, q0, N, scale_log2);

  float o[kRows][kOCols] = {};     // this thread's part of the output tile, unnormalized
  ft::OnlineSoftmax row[kRows];    // m and this thread's share of l, per row
#pragma unroll
  for (int i = 0; i < kRows; ++i) row[i] = ft::online_softmax_empty();

  const int kv_end = causal ? min(N, q0 + Br) : N;  // causal: skip tiles above the diagonal
  for (int kv0 = 0; kv0 < kv_end; kv0 += Bc) {
    load_tile_transposed<Bc, D, T::kThreads>(Kt, K, kv0, N);
    load_tile<Bc, D, T::kThreads>(Vs, V, kv0, N);
    __syncthreads();  // the tiles (and, the first time, Qᵀ) are in place

    float s[kRows][kSCols] = {};  // S = Q·Kᵀ, this thread's micro-tile
    mma_tile<D, Rows, SCols>(s, Qt, Br, Kt, Bc, tr, tc);

    // Only two kinds of tile need a mask: the last one, past N; under causal, the ones that
    // cross the diagonal. A masked score is -inf: weight exp2(-inf) = 0.
    if (kv0 + Bc > N || (causal && kv0 + Bc - 1 > q0)) {
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        const int q = q0 + Rows::at(tr, i);
#pragma unroll
        for (int j = 0; j < kSCols; ++j) {
          const int key = kv0 + SCols::at(tc, j);
          if (key >= N || (causal && key > q)) s[i][j] = -INFINITY;
        }
      }
    }

    // Online softmax. The tile's row max needs all TC threads of the row (shuffles within a
    // warp); then each thread rescales its own part of l and O and exponentiates its scores.
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < kSCols; ++j) tile_max = fmaxf(tile_max, s[i][j]);
      const float alpha = ft::online_rescale(row[i], row_max<TC>(tile_max));
      const float base = ft::online_exp_base(row[i].m);  // never (-inf) - (-inf)
#pragma unroll
      for (int j = 0; j < kSCols; ++j) {
        s[i][j] = exp2_ftz(s[i][j] - base);  // P, in place
        row[i].l += s[i][j];
      }
#pragma unroll
      for (int c = 0; c < kOCols; ++c) o[i][c] *= alpha;
    }

    // O += P·V. The product needs whole rows of P, which TC threads hold between them:
    // P goes through shared memory, transposed, the layout mma_tile reads.
    store_tile_transposed<Rows, SCols>(Pt, T::kLdP, s, tr, tc);
    __syncthreads();  // all of Pᵀ written
    mma_tile<Bc, Rows, OCols>(o, Pt, T::kLdP, Vs, D, tr, tc);
    __syncthreads();  // everyone is done with Kᵀ, V and Pᵀ before the next tile overwrites them
  }

  // Epilogue: add up l across the row's threads, divide once, write O and lse once.
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    const float l = row_sum<TC>(row[i].l);
    const int q = q0 + Rows::at(tr, i);
    if (q < N) {
      store_fragment<OCols>(O + int64_t(q) * D, o[i], tc, l > 0.f ? 1.f / l : 0.f);
      if (tc == 0) lse[q] = ft::online_lse({row[i].m, l});
    }
  }
}

}  // namespace
}  // namespace ch04
