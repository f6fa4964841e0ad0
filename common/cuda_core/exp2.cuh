/// @file exp2.cuh
/// @brief 2^x in one instruction, for every softmax on the GPU (chapters 04, 05, 07, 08).
#pragma once

namespace ft {

/// 2^x in one instruction (MUFU.EX2). exp2f() wraps that instruction in a range check (a
/// compare and two multiplies) so that results below 2^-126 come out as exact denormals; a
/// softmax weight that small adds nothing next to the row's largest weight, 2^0 = 1, so
/// flushing it to zero (ftz) loses nothing. exp2(-inf) = 0, as a masked score needs.
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace ft
