/// @file pack.cuh
/// @brief Two floats → one 32-bit register of two bf16 or fp16 (`cvt.rn.bf16x2.f32`,
/// `cvt.rn.f16x2.f32`, sm_80+) and back, and with it P = softmax(S) from its float accumulator
/// fragments to the A operand of P·V, in registers.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "sm80/fragment.hpp"
#include "sm80/mma.cuh"  // kIsTensorCoreElement

namespace ft::tc {

/// {lo, hi} rounded to nearest (ties to even) and packed, lo in the low 16 bits: where every
/// fragment keeps the first of its register's two elements (a_{2r}, b_{2r}). The PTX
/// instruction `cvt d, a, b` puts a in the HIGH half, so hi is passed first.
template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  static_assert(kIsTensorCoreElement<T>, "bf16 or fp16");
  uint32_t r = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // sm_80 instructions; never reached on older GPUs (see sm80/mma.cuh)
#else
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
#endif
  return r;
}

/// One bf16 or fp16 element as a float (exact), and a float rounded to nearest (ties to even)
/// into one: the single-element conversions around the kernels' packed ones.
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
template <class T>
__device__ __forceinline__ T from_float(float x) {
  static_assert(kIsTensorCoreElement<T>, "bf16 or fp16");
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(x);
  else return __float2half_rn(x);
}

/// The inverse of pack2: the two elements of a packed register (low half first), back in
/// float32 (exact: every bf16 and fp16 value is a float).
template <class T>
__device__ __forceinline__ float2 unpack2(uint32_t r) {
  static_assert(kIsTensorCoreElement<T>, "bf16 or fp16");
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 v;
    memcpy(&v, &r, sizeof(r));
    return __bfloat1622float2(v);
  } else {
    __half2 v;
    memcpy(&v, &r, sizeof(r));
    return __half22float2(v);
  }
}

/// P's A fragment for 16 keys from the two accumulator tiles that hold them (keys 0-7 and
/// 8-15, as S = Q·Kᵀ left them): a_i = tile[i/4].c[i%4], see a_from_c. No shuffles, no
/// shared memory: each lane converts what it already holds.
template <class T>
__device__ __forceinline__ FragA a_from_accumulators(const FragC& keys0_7, const FragC& keys8_15) {
  FragA a;
#pragma unroll
  for (int reg = 0; reg < kARegs; ++reg) {
    const CSource lo = a_from_c(kPair * reg), hi = a_from_c(kPair * reg + 1);
    const FragC& tile = lo.tile == 0 ? keys0_7 : keys8_15;  // hi is in the same tile
    a.r[reg] = pack2<T>(tile.c[lo.index], tile.c[hi.index]);
  }
  return a;
}

}  // namespace ft::tc
