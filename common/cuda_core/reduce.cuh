/// @file reduce.cuh
/// @brief Warp- and block-wide reductions with register shuffles: a row's max or sum
/// computed by all the threads that hold pieces of it, without a trip through memory.
#pragma once

#include <cuda_runtime.h>

#include <cmath>

#include "cuda_core/online_softmax.cuh"

namespace ft {

constexpr int kWarpSize = 32;           ///< threads per warp on every NVIDIA GPU
constexpr unsigned kFullMask = 0xffffffffu;  ///< all 32 lanes take part in the shuffle

/// Max over the 32 lanes of a warp; every lane gets the result (butterfly: 5 steps).
__device__ __forceinline__ float warp_max(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

/// Sum over the 32 lanes of a warp; every lane gets the result.
__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

/// Max over the 4 neighbouring lanes 4g..4g+3 that hold one row of a tensor-core accumulator
/// (mma.sync's C fragment, and wgmma's warp by warp: sm80/fragment.hpp); all four get it.
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(kFullMask, x, 1));
  return fmaxf(x, __shfl_xor_sync(kFullMask, x, 2));
}

/// Sum over the 4 lanes that hold one row of a tensor-core accumulator (as quad_max).
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(kFullMask, x, 1);
  return x + __shfl_xor_sync(kFullMask, x, 2);
}

/// Online-softmax states merged over the 32 lanes of a warp; every lane gets the result.
__device__ __forceinline__ OnlineSoftmax warp_merge(OnlineSoftmax s) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    OnlineSoftmax other{__shfl_xor_sync(kFullMask, s.m, offset),
                        __shfl_xor_sync(kFullMask, s.l, offset)};
    s = online_merge(s, other);
  }
  return s;
}

namespace detail {
/// One value per warp goes through shared memory; the warp-level reduction `warp_op`
/// then combines them. Every thread gets the result.
template <typename T, typename WarpOp>
__device__ __forceinline__ T block_reduce(T v, T* scratch, T identity, WarpOp warp_op) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  v = warp_op(v);
  __syncthreads();  // the previous call's readers are done with scratch
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < int(blockDim.x / kWarpSize) ? scratch[lane] : identity;
  return warp_op(v);
}
}  // namespace detail

// Block-wide reductions: every thread of the block must call them (they contain
// __syncthreads()); blockDim.x must be a multiple of 32 and at most 1024, and `scratch`
// is shared memory with one entry per warp (32 entries always suffice).

__device__ __forceinline__ float block_max(float v, float* scratch) {
  return detail::block_reduce(v, scratch, -INFINITY, [](float x) { return warp_max(x); });
}
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  return detail::block_reduce(v, scratch, 0.f, [](float x) { return warp_sum(x); });
}
__device__ __forceinline__ OnlineSoftmax block_merge(OnlineSoftmax s, OnlineSoftmax* scratch) {
  return detail::block_reduce(s, scratch, online_softmax_empty(),
                              [](OnlineSoftmax x) { return warp_merge(x); });
}

}  // namespace ft
