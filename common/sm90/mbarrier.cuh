/// @file mbarrier.cuh
/// @brief The shared-memory barrier that the copy engine signals (sm_90): a counter of
/// arrivals and of bytes, whose phase flips when both reach zero, and the tile copy that
/// signals it. Thin names over libcu++'s `cuda::ptx` wrappers.
///
/// One barrier a pipeline stage. Its life, one phase:
///   1. one thread `arrive_expect_tx(bar, bytes)`: one arrival, and `bytes` still to come;
///   2. the copy engine's `copy_box` calls land and count their bytes down;
///   3. when the bytes reach zero (and the arrivals, here one), the phase completes;
///   4. every consumer `wait(bar, phase)` returns, the data visible to it; the next use of
///      the stage waits on the other parity.
/// Reusing the stage's memory for the next copy is the kernel's business: a block barrier
/// after every thread is done with it (chapter 09's step 2), or a second, *empty* barrier
/// on which each consumer arrives when done (steps 3-7, chapters 10 and 11).
#pragma once

#include <cuda.h>  // CUtensorMap
#include <cuda/ptx>

#include <cstdint>

namespace ft::sm90 {

/// Sets the barrier up for `arrivals` arrivals a phase; once, by one thread. The init is an
/// ordinary (generic-proxy) write to shared memory, and the copy engine that will count
/// bytes down the barrier works through the async proxy: the fence makes the initialized
/// barrier visible there (the CUDA Programming Guide's TMA example does the same). A block
/// barrier must still follow before any other thread arrives or waits.
__device__ __forceinline__ void barrier_init(uint64_t* bar, uint32_t arrivals) {
  cuda::ptx::mbarrier_init(bar, arrivals);
  cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);
}

/// This thread's arrival, announcing `bytes` the copy engine will deliver this phase.
__device__ __forceinline__ void arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared,
                                       bar, bytes);
}

/// This thread's arrival, no bytes: a consumer saying it is done with a stage.
__device__ __forceinline__ void arrive(uint64_t* bar) { cuda::ptx::mbarrier_arrive(bar); }

/// Waits until the barrier's phase of parity `phase` has completed.
__device__ __forceinline__ void wait(uint64_t* bar, uint32_t phase) {
  while (!cuda::ptx::mbarrier_try_wait_parity(bar, phase)) {
  }
}

/// Copies the box at (col, row, head, batch) of the tensor `map` describes into `dst`
/// (1024-byte aligned shared memory for the 128-byte swizzle); its bytes count down `bar`.
__device__ __forceinline__ void copy_box(void* dst, const CUtensorMap* map, int col, int row, int head,
                                         int batch, uint64_t* bar) {
  const int32_t coords[4] = {col, row, head, batch};
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global, dst, map, coords, bar);
}

/// Copies `bytes` contiguous bytes from device memory at `src` into shared memory at `dst`
/// (both 16-byte aligned, bytes a multiple of 16); they count down `bar` as copy_box's do.
__device__ __forceinline__ void copy_bytes(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_global, dst, src, bytes, bar);
}

}  // namespace ft::sm90
