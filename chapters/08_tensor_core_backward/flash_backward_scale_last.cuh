/// @file flash_backward_scale_last.cuh
/// @brief Variant `scale_last` (UNMEASURED): spread_atomics with the softmax scale taken out
/// of dS and applied once, to dK at its store and to dQ in convert_dq.
///
/// What changes from `spread_atomics`, and why. dS = scale·P∘(dP − D) costs each element a
/// subtraction and two multiplications, 64 a lane a query tile at d = 64 and 32 at d = 128
/// (the SASS: FADD, FMUL, FMUL). The scale is one number for the whole problem, and both
/// products that read dS are linear in it: dK = scale·(Σ dSᵀ·Q) and dQ = scale·(Σ dS·K) with
/// dS = P∘(dP − D). So the key blocks store P∘(dP − D) (one multiplication fewer an element),
/// scale dK once when they write it, and the dQ accumulator is scaled once by convert_dq.
/// (FlashAttention-2 does the same.) Rounding: dS is rounded to bf16/fp16 unscaled instead
/// of scaled, the same relative error.
///
/// Forecast, before any run: Nsight Compute counted 1488 executed instructions a warp a query
/// tile at d = 64 (1.56e9 at N = 4096, B = 4) and 1164 at d = 128 (1.22e9); 64 and 32 fewer
/// is 4.3% and 2.7%. The multiplications are not shared-memory or global instructions, so
/// the spacing of the atomics (what spread_even's experiment showed matters) is unchanged;
/// if the cycles per instruction hold, 3-4% faster at d = 64 and about 2% at d = 128.
///
/// Run: ./build/chapters/08_tensor_core_backward/ch08_tensor_core_backward --variant scale_last
#pragma once

#include "08_tensor_core_backward/flash_backward_spread_atomics.cuh"

namespace ch08 {

/// spread_atomics with the softmax scale applied after the loop.
template <class Element, int D_>
struct ScaleLastTraits : SpreadAtomicsTraits<Element, D_> {
  static constexpr bool kScaleLast = true;
};

}  // namespace ch08
