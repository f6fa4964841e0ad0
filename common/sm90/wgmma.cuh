/// @file wgmma.cuh
/// @brief Hopper's warpgroup matrix instruction, `wgmma.mma_async.m64nNk16` with bf16 or
/// fp16 inputs and float32 accumulators (sm_90a only), and the three instructions that
/// order it: `wgmma.fence`, `commit_group`, `wait_group`.
///
/// What is new against mma.sync (sm80/mma.cuh), in the order a kernel meets it:
/// - **Four warps, one instruction.** The 128 threads of a warpgroup (4 consecutive warps,
///   the first one's index a multiple of 4) issue it together: D[64 × N] += A[64 × 16] ·
///   B[16 × N], N = 64 or 128 here (any multiple of 8 up to 256 exists). Each thread holds
///   N/2 floats of D (smem_layout.hpp draws which).
/// - **Operands from shared memory, read by the tensor cores themselves.** B always, A
///   unless it comes from registers: a 64-bit descriptor (smem_layout.hpp) says where and
///   in which layout. No ldmatrix, no fragment registers for B.
/// - **Asynchronous.** The instruction returns before D is written. `fence()` must come
///   before the first wgmma that reads registers (D or A) other code has written;
///   `commit()` closes a group of issued wgmmas; `wait<n>()` blocks until at most n groups
///   are still running, after which D may be read. Between issue and wait the warps are free
///   to do other work: the overlap chapter 09's later steps are built on.
/// - **A from registers** (`_rs`): four 32-bit registers a thread in mma.sync's A layout
///   (sm80/fragment.hpp), warp w for rows 16w-16w+15. S's accumulator converted to bf16 is
///   exactly that layout for P, as with mma.sync: O += P·V needs no trip through memory.
///
/// `accumulate = false` makes D = A·B (the first k-step of a product); `kTransB` says B is
/// MN-major (rows along k, as V is in O = P·V) rather than K-major.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "sm90/smem_layout.hpp"

namespace ft::sm90 {

/// Makes the accumulator (or A) registers written by ordinary code visible to the next
/// wgmma; once before a product's first wgmma.
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
/// Closes the group of wgmmas this warpgroup issued since the last commit.
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
/// Waits until at most kPending committed groups are still running.
template <int kPending>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
/// Orders this thread's ordinary shared-memory stores before what the async proxy (the
/// tensor cores reading wgmma's operands, the copy engine) does next; each writing thread,
/// before the barrier that publishes the tile.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
/// Keeps the compiler from moving reads or writes of these registers across a wgmma that
/// is still running (the asm above does not name them).
template <int kRegs>
__device__ __forceinline__ void fence_registers(float (&d)[kRegs]) {
#pragma unroll
  for (int i = 0; i < kRegs; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// The instructions, spelled out: each lists its N/2 accumulator registers by number.
#define FT_WGMMA_SS_N32(TY)                                                         \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"                                \
               "wgmma.mma_async.sync.aligned.m64n32k16.f32." TY "." TY " "                   \
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "   \
               "%16, %17, p, 1, 1, %19, %20;\n}\n"                                       \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]) \
      : "l"(desc_a), "l"(desc_b), "r"(int(accumulate)), "n"(int(kTransA)), "n"(int(kTransB)))

#define FT_WGMMA_SS_N64(TY)                                                         \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " "                   \
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "   \
               "%32, %33, p, 1, 1, %35, %36;\n}\n"                                       \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
      "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]) \
      : "l"(desc_a), "l"(desc_b), "r"(int(accumulate)), "n"(int(kTransA)), "n"(int(kTransB)))

#define FT_WGMMA_RS_N64(TY)                                                         \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " "                   \
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "   \
               "{%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"                  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
      "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]) \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(int(accumulate)), "n"(int(kTransB)))

#define FT_WGMMA_SS_N128(TY)                                                         \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " "                   \
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "   \
               "%64, %65, p, 1, 1, %67, %68;\n}\n"                                       \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
      "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
      "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
      "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
      "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
      "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
      : "l"(desc_a), "l"(desc_b), "r"(int(accumulate)), "n"(int(kTransA)), "n"(int(kTransB)))

#define FT_WGMMA_RS_N128(TY)                                                         \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " "                   \
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "   \
               "{%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"                  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
      "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
      "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
      "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
      "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
      "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(int(accumulate)), "n"(int(kTransB)))

/// D[64 × N] (+)= A · B, A and B in shared memory (descriptors). T: __nv_bfloat16 or __half.
/// kTransA: A is MN-major (its rows run along k, M contiguous: a tile stored transposed, as
/// the backward's dS is when dQ = dS·K reads it); 16-bit inputs only, which these are.
template <class T, int N, bool kTransB = false, bool kTransA = false>
__device__ __forceinline__ void mma_ss(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, bool accumulate) {
  static_assert(N == 32 || N == 64 || N == 128, "the shapes this layer spells out");
  constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  static_assert(kBf16 || std::is_same_v<T, __half>, "bf16 or fp16 inputs");
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (N == 32) {
    if constexpr (kBf16) FT_WGMMA_SS_N32("bf16"); else FT_WGMMA_SS_N32("f16");
  } else if constexpr (N == 64) {
    if constexpr (kBf16) FT_WGMMA_SS_N64("bf16"); else FT_WGMMA_SS_N64("f16");
  } else {
    if constexpr (kBf16) FT_WGMMA_SS_N128("bf16"); else FT_WGMMA_SS_N128("f16");
  }
#elif defined(__CUDA_ARCH__)
  __trap();  // built for a GPU without wgmma: the kernels that get here are refused first
#endif
}

/// D[64 × N] (+)= A · B, A from registers (mma.sync's A layout, a[4]), B in shared memory.
template <class T, int N, bool kTransB = false>
__device__ __forceinline__ void mma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b,
                                       bool accumulate) {
  static_assert(N == 64 || N == 128, "the shapes this layer spells out");
  constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  static_assert(kBf16 || std::is_same_v<T, __half>, "bf16 or fp16 inputs");
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (N == 64) {
    if constexpr (kBf16) FT_WGMMA_RS_N64("bf16"); else FT_WGMMA_RS_N64("f16");
  } else {
    if constexpr (kBf16) FT_WGMMA_RS_N128("bf16"); else FT_WGMMA_RS_N128("f16");
  }
#elif defined(__CUDA_ARCH__)
  __trap();
#endif
}

#undef FT_WGMMA_SS_N32
#undef FT_WGMMA_SS_N64
#undef FT_WGMMA_RS_N64
#undef FT_WGMMA_SS_N128
#undef FT_WGMMA_RS_N128

}  // namespace ft::sm90
