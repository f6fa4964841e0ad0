/// @file slabs.cuh
/// @brief The copy that both of chapter 02's matrix-product kernels start each step with
/// (smem_tiles.cuh, register_tiles.cuh): one slab of an operand into shared memory,
/// coalesced whichever way the operand is stored.
///
/// (Included by those two files only.)
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ch02 {
namespace {

/// Copies the kSlab×kTile slab of one operand into shared memory as slab[k][t], where t is
/// the row of op(A) (m) or the column of op(B) (n), with zeros outside the matrix. The
/// operand is stored T×K (k contiguous, kKContiguous) or K×T (t contiguous); either way
/// consecutive threads read consecutive addresses, so the loads are coalesced. The block's
/// kThreads threads copy kSlab·kTile/kThreads elements each; slab rows are kLd ≥ kTile
/// floats apart (kLd − kTile is the kernel's padding against bank conflicts).
template <bool kKContiguous, int kTile, int kThreads, int kSlab, int kLd>
__device__ __forceinline__ void load_slab(float (&slab)[kSlab][kLd], const float* X, int T,
                                          int K, int t0, int k0) {
  static_assert(kSlab * kTile % kThreads == 0 && kLd >= kTile, "whole elements a thread");
#pragma unroll
  for (int r = 0; r < kSlab * kTile / kThreads; ++r) {  // register_tiles.cuh: 4 a thread
    const int e = r * kThreads + threadIdx.x;
    const int t = kKContiguous ? e / kSlab : e % kTile;
    const int k = kKContiguous ? e % kSlab : e / kTile;
    const int gt = t0 + t, gk = k0 + k;
    float v = 0.f;
    if (gt < T && gk < K) v = kKContiguous ? X[int64_t(gt) * K + gk] : X[int64_t(gk) * T + gt];
    slab[k][t] = v;
  }
}

}  // namespace
}  // namespace ch02
