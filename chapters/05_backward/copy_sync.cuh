/// @file copy_sync.cuh
/// @brief How the variant `flash_sync` of chapter 05's flash backward copies its tiles into
/// shared memory: plain loads into registers, then stores. The other variants copy by
/// cp.async (copy_async.cuh); `diff copy_sync.cuh copy_async.cuh` is the whole difference.
///
/// (Included by copy_async.cuh, whose copies are these on a GPU older than sm_80.)
#pragma once

#include <cuda_runtime.h>

namespace ch05 {

// A plain copy passes through a register: the thread loads from global memory, and its
// store to shared memory has to wait for the load to arrive, so the thread stalls there
// (other warps of the SM may run meanwhile). In load_tile every row a thread copies sits
// behind the loop's bound check, so the compiler keeps each load next to its store
// (cuobjdump -sass: each LDG.E.128 followed by its STS.128): one memory latency per row, 4
// rows of Q and 4 of dO a thread at d = 64, 8 and 8 at d = 128. The store is complete for
// its thread when the thread passes it, for the block after the next __syncthreads(): the
// same synchronisation as cp.async's, with wait_all() left with nothing to wait for.

/// The copies of flash_backward.cuh's load_tile and load_row_stats, by plain loads and
/// stores.
struct CopySync {
  /// Copies 16 bytes (or, if !in_range, writes 16 zero bytes) to shared memory: one float4
  /// load and one float4 store. .cg, cached in L2 only, like cp.async.cg's copy: the same
  /// path through the caches, so that the overlap is the only difference.
  static __device__ __forceinline__ void copy_16(float* dst, const float* src, bool in_range) {
    *reinterpret_cast<float4*>(dst) = in_range ? __ldcg(reinterpret_cast<const float4*>(src))
                                               : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  /// The same for 4 bytes (a plain load, cached in L1 like cp.async.ca's copy).
  static __device__ __forceinline__ void copy_4(float* dst, const float* src, bool in_range) {
    *dst = in_range ? *src : 0.f;
  }
  /// Nothing to wait for: every copy landed before its thread went on.
  static __device__ __forceinline__ void wait_all() {}
};

}  // namespace ch05
