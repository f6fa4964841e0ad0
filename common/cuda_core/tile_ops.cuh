/// @file tile_ops.cuh
/// @brief Register tiling on the CUDA cores, in small pieces that the fused forward and the
/// flash backward (chapters 04 and 05) both build from: tile loaders (global → shared
/// memory), the layout of a thread's register micro-tile, the micro-GEMM step on that tile,
/// and row reductions over the lanes that share a row.
///
/// Conventions. A block computes a tile of Rows × Cols results (a score tile S or an output
/// tile O). Its threads form a grid of TR × TC; thread (tr, tc) owns Rows/TR rows and
/// Cols/TC columns of the tile, in registers. `tc = threadIdx.x % TC`, so the TC threads
/// that share a row are TC consecutive lanes of one warp (TC is a power of two ≤ 32) and
/// can reduce a row with register shuffles.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_core/exp2.cuh"
#include "cuda_core/reduce.cuh"

namespace ft::cuda_core {

/// Which positions of a tile dimension of width W a thread owns when T threads split it
/// (W/T each). A thread owns runs of kVec consecutive positions, kVec = 4 when it can: one
/// 16-byte shared-memory read fetches a whole run. The T threads' runs sit side by side,
/// so when neighbouring lanes read their runs a warp touches consecutive addresses: no two
/// lanes hit the same bank with different addresses (no bank conflict). Example W = 128,
/// T = 16: thread t owns positions 4t..4t+3 and 64+4t..64+4t+3.
template <int W, int T>
struct Split {
  static_assert(W % T == 0, "the tile must split evenly among the threads");
  static constexpr int kCount = W / T;                 ///< positions per thread
  static constexpr int kVec = kCount >= 4 ? 4 : kCount;  ///< length of one run (one read)
  static_assert(kVec == 1 || kVec == 2 || kVec == 4, "runs must be 1, 2 or 4 floats");
  static_assert(kCount % kVec == 0, "a thread's positions must be whole runs");

  /// Position in the tile of element e (0 ≤ e < kCount) of thread t.
  __host__ __device__ static constexpr int at(int t, int e) {
    return (e / kVec) * (kVec * T) + t * kVec + e % kVec;
  }
};

/// Reads the S::kCount values thread t owns from one row of a shared-memory tile,
/// S::kVec floats (16, 8 or 4 bytes) per load instruction.
template <class S>
__device__ __forceinline__ void load_fragment(float (&f)[S::kCount], const float* row, int t) {
#pragma unroll
  for (int e = 0; e < S::kCount; e += S::kVec) {
    const float* p = row + S::at(t, e);
    if constexpr (S::kVec == 4) {
      const float4 v = *reinterpret_cast<const float4*>(p);
      f[e] = v.x, f[e + 1] = v.y, f[e + 2] = v.z, f[e + 3] = v.w;
    } else if constexpr (S::kVec == 2) {
      const float2 v = *reinterpret_cast<const float2*>(p);
      f[e] = v.x, f[e + 1] = v.y;
    } else {
      f[e] = *p;
    }
  }
}

/// Writes the S::kCount values thread t owns into one row (in global or shared memory),
/// each multiplied by `mult`, S::kVec floats per store instruction.
template <class S>
__device__ __forceinline__ void store_fragment(float* row, const float (&f)[S::kCount], int t,
                                               float mult = 1.f) {
#pragma unroll
  for (int e = 0; e < S::kCount; e += S::kVec) {
    float* p = row + S::at(t, e);
    if constexpr (S::kVec == 4) {
      *reinterpret_cast<float4*>(p) =
          make_float4(f[e] * mult, f[e + 1] * mult, f[e + 2] * mult, f[e + 3] * mult);
    } else if constexpr (S::kVec == 2) {
      *reinterpret_cast<float2*>(p) = make_float2(f[e] * mult, f[e + 1] * mult);
    } else {
      *p = f[e] * mult;
    }
  }
}

/// The micro-GEMM: acc += Aᵀ·B on thread (tr, tc)'s register micro-tile, with A stored
/// [K][lda] and B stored [K][ldb] in shared memory (so row i of the result is column i of
/// A, and column j is column j of B). Step k reads Rows::kCount values of A's row k and
/// Cols::kCount values of B's row k, then does Rows::kCount × Cols::kCount FMAs on them:
/// an outer product. With 8 × 8 that is 64 FMAs for 16 floats read (4 float4 loads), which
/// is what lets the FMA units, not shared memory, set the pace.
template <int K, class Rows, class Cols>
__device__ __forceinline__ void mma_tile(float (&acc)[Rows::kCount][Cols::kCount],
                                         const float* A, int lda, const float* B, int ldb,
                                         int tr, int tc) {
#pragma unroll 4  // enough to overlap the next step's loads with this step's FMAs
  for (int k = 0; k < K; ++k) {
    float a[Rows::kCount], b[Cols::kCount];
    load_fragment<Rows>(a, A + k * lda, tr);
    load_fragment<Cols>(b, B + k * ldb, tc);
#pragma unroll
    for (int i = 0; i < Rows::kCount; ++i)
#pragma unroll
      for (int j = 0; j < Cols::kCount; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
  }
}

/// Writes thread (tr, tc)'s micro-tile transposed into shared memory, dst[col][row] with
/// row stride ld: the layout the next mma_tile wants for its A operand (P of the forward,
/// dS of the backward). A run of Rows::kVec rows of one column goes in one store.
template <class Rows, class Cols>
__device__ __forceinline__ void store_tile_transposed(float* dst, int ld,
                                                      const float (&acc)[Rows::kCount][Cols::kCount],
                                                      int tr, int tc) {
#pragma unroll
  for (int j = 0; j < Cols::kCount; ++j) {
    float column[Rows::kCount];
#pragma unroll
    for (int i = 0; i < Rows::kCount; ++i) column[i] = acc[i][j];
    store_fragment<Rows>(dst + Cols::at(tc, j) * ld, column, tr);
  }
}

/// Copies rows [row0, row0 + ROWS) of a row-major [N][D] matrix into shared memory as they
/// are, dst[r][k] with row stride D; rows at or past N become zeros (a zero key row gives a
/// finite score that the mask then removes; a zero value row adds nothing to O).
/// Consecutive threads load consecutive 16-byte pieces of a row: coalesced.
template <int ROWS, int D, int THREADS>
__device__ __forceinline__ void load_tile(float* dst, const float* src, int row0, int N) {
  constexpr int kVecsPerRow = D / 4;  // D is a multiple of 4: whole float4s
  static_assert((ROWS * kVecsPerRow) % THREADS == 0, "every thread loads the same count");
#pragma unroll
  for (int it = 0; it < ROWS * kVecsPerRow / THREADS; ++it) {
    const int i = it * THREADS + threadIdx.x;
    const int r = i / kVecsPerRow, k = (i % kVecsPerRow) * 4;
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (row0 + r < N) v = *reinterpret_cast<const float4*>(src + int64_t(row0 + r) * D + k);
    *reinterpret_cast<float4*>(dst + r * D + k) = v;
  }
}

/// The same rows stored transposed, dst[k][r] = mult · src[row0 + r][k] with row stride
/// ROWS, zeros for rows at or past N. Here consecutive threads take consecutive rows, so
/// that their four scalar stores (one per k of the float4 they loaded) go to consecutive
/// shared-memory addresses: no bank conflicts. `mult` folds a scale into the copy.
template <int ROWS, int D, int THREADS>
__device__ __forceinline__ void load_tile_transposed(float* dst, const float* src, int row0,
                                                     int N, float mult = 1.f) {
  static_assert((ROWS * D / 4) % THREADS == 0, "every thread loads the same count");
#pragma unroll
  for (int it = 0; it < ROWS * D / 4 / THREADS; ++it) {
    const int i = it * THREADS + threadIdx.x;
    const int r = i % ROWS, k = (i / ROWS) * 4;
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (row0 + r < N) v = *reinterpret_cast<const float4*>(src + int64_t(row0 + r) * D + k);
    dst[(k + 0) * ROWS + r] = v.x * mult;
    dst[(k + 1) * ROWS + r] = v.y * mult;
    dst[(k + 2) * ROWS + r] = v.z * mult;
    dst[(k + 3) * ROWS + r] = v.w * mult;
  }
}

/// Max over the T lanes that share a row (T consecutive lanes, T a power of two ≤ 32):
/// a butterfly of log2(T) shuffles; every lane of the group gets the result.
template <int T>
__device__ __forceinline__ float row_max(float v) {
  static_assert(T >= 1 && T <= ft::kWarpSize && (T & (T - 1)) == 0, "T: a power of two ≤ 32");
#pragma unroll
  for (int offset = T / 2; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(ft::kFullMask, v, offset));
  return v;
}

/// Sum over the T lanes that share a row, as row_max.
template <int T>
__device__ __forceinline__ float row_sum(float v) {
  static_assert(T >= 1 && T <= ft::kWarpSize && (T & (T - 1)) == 0, "T: a power of two ≤ 32");
#pragma unroll
  for (int offset = T / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(ft::kFullMask, v, offset);
  return v;
}

}  // namespace ft::cuda_core
