/// @file copy_async.cuh
/// @brief How chapter 05's flash backward copies its tiles into shared memory (variants
/// `flash`, `flash_dq_pass`, `flash_bc128`): cp.async. The variant `flash_sync` copies with
/// plain loads and stores instead (copy_sync.cuh): `diff copy_sync.cuh copy_async.cuh`.
///
/// (Included by flash_backward.cuh.)
#pragma once

#include <cuda_runtime.h>

#include "05_backward/copy_sync.cuh"  // CopySync: these copies on a GPU older than sm_80
#include "sm80/cp_async.cuh"          // ft::tc::cp_async_16, cp_async_4: the instruction, wrapped once

namespace ch05 {

// cp.async (sm_80+) copies global memory straight into shared memory without passing through
// registers, and the thread goes on while the copy is in flight: the way to load the next
// tile while computing on this one without the registers a prefetch would need (a 64 KB
// Q/dO tile is 64 floats for each of 256 threads). A copy is complete for its thread after
// wait_all(), for the block after the __syncthreads() that follows.

/// The copies of flash_backward.cuh's load_tile and load_row_stats, by cp.async.
/// (Built for a GPU older than sm_80, they are CopySync's: the same bytes in the same
/// places, just without the overlap.)
struct CopyAsync {
  /// Copies 16 bytes (or, if !in_range, writes 16 zero bytes) to shared memory,
  /// asynchronously. .cg: cached in L2 only, as these tiles are never re-read through L1.
  static __device__ __forceinline__ void copy_16(float* dst, const float* src, bool in_range) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    CopySync::copy_16(dst, src, in_range);
#else
    ft::tc::cp_async_16(dst, src, in_range);  // out of range: 16 zero bytes, nothing read
#endif
  }
  /// The same for 4 bytes (.ca: the only cache mode 4-byte copies allow).
  static __device__ __forceinline__ void copy_4(float* dst, const float* src, bool in_range) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    CopySync::copy_4(dst, src, in_range);
#else
    ft::tc::cp_async_4(dst, src, in_range);
#endif
  }
  /// Waits until this thread's copies have landed.
  static __device__ __forceinline__ void wait_all() {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
  }
};

}  // namespace ch05
