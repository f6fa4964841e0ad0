/// @file mma.cuh
/// @brief One tensor-core instruction: `mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}`,
/// D = A·B + C for a 16×16 A, a 16×8 B and a 16×8 float C, computed by one warp (sm_80+).
///
/// The whole warp executes it together; each lane brings its registers of A, B and C in the
/// fragment layouts drawn in sm80/fragment.hpp and gets its part of D back in C's layout. A
/// product of two bf16 or fp16 values is exact in float32; the sum is kept at float32
/// precision, in an order (and with internal rounding) that the PTX ISA leaves to the hardware.
/// ".row.col": A is read as rows of k, B as columns of k — for B = Kᵀ that is K's rows.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "sm80/fragment.hpp"

namespace ft::tc {

/// The element types the tensor-core chapters compute in: bf16 and fp16.
template <class T>
constexpr bool kIsTensorCoreElement =
    std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>;

/// acc += A·B on the tensor cores; T (__nv_bfloat16 or __half) is the type of A and B.
template <class T>
__device__ __forceinline__ void mma_m16n8k16(FragC& acc, const FragA& a, const FragB& b) {
  static_assert(kIsTensorCoreElement<T>, "A and B are bf16 or fp16");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  // Built for an older GPU (the whole project compiles for it): never reached, because every
  // kernel that gets here is refused before its launch (ft::require_sm, impl.min_sm = 80).
  __trap();
#else
  // Plain asm (not volatile): a function of registers only, which the compiler may schedule.
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(acc.c[0]), "+f"(acc.c[1]), "+f"(acc.c[2]), "+f"(acc.c[3])
        : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.r[0]), "r"(b.r[1]));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(acc.c[0]), "+f"(acc.c[1]), "+f"(acc.c[2]), "+f"(acc.c[3])
        : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.r[0]), "r"(b.r[1]));
  }
#endif
}

}  // namespace ft::tc
