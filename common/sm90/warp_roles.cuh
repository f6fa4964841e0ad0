/// @file warp_roles.cuh
/// @brief What a warp-specialized kernel needs beyond the copy engine and wgmma (sm_90a):
/// moving registers between warpgroups (`setmaxnreg`) and barriers among some of the
/// block's warps only (named barriers, `bar.sync` / `bar.arrive` with an id and a count).
///
/// Registers. A block of 384 threads at one block per SM may use 65536 / 384 = 170
/// registers a thread (168 after allocation granularity), the same for every warp. A
/// producer warpgroup that only issues copies needs a couple of dozen; the consumers, whose
/// accumulators hold S and O, want more than 168. `setmaxnreg.dec` gives a warpgroup's
/// registers back to the SM's pool, `setmaxnreg.inc` takes them (waiting until the pool has
/// them). Both are executed by all 128 threads of a warpgroup (`.sync.aligned`), take a
/// multiple of 8 from 24 to 256, and work only when the kernel starts with a fixed register
/// count (`__launch_bounds__(threads, 1)`); ptxas says so (C7508) when it ignores them.
///
/// Named barriers. `__syncthreads()` is barrier 0 over the whole block; ids 1 to 15 can
/// each synchronize a subset: `named_sync(id, n)` waits until n threads have reached barrier
/// id (by sync or arrive), `named_arrive(id, n)` counts this thread's warp in without waiting. A
/// warp-specialized kernel never uses barrier 0 once the roles split (the producer's idle
/// warps have left), and two consumer warpgroups take turns through a pair of named
/// barriers (chapter 09's ping-pong: one waits on its id, the other arrives on it).
#pragma once

#include <cstdint>

namespace ft::sm90 {

/// This thread's warpgroup (128 threads each), as a value the compiler knows to be the same
/// across the warp (a broadcast from lane 0; threadIdx.x / 128 it must assume differs by
/// thread): the shared-memory addresses and wgmma descriptors computed from it can live in
/// uniform registers, once a warp, which is where wgmma reads its descriptors.
__device__ __forceinline__ int warpgroup_index() { return __shfl_sync(0xffffffffu, int(threadIdx.x) / 128, 0); }

/// This warpgroup's register budget lowered to kRegs (the producer's).
template <int kRegs>
__device__ __forceinline__ void release_registers() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg: a multiple of 8, 24 to 256");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

/// This warpgroup's register budget raised to kRegs (a consumer's).
template <int kRegs>
__device__ __forceinline__ void claim_registers() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg: a multiple of 8, 24 to 256");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

/// Waits at named barrier `id` (1-15) until `threads` (a multiple of 32) have arrived.
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

/// Counts this warp in at named barrier `id` without waiting.
__device__ __forceinline__ void named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace ft::sm90
