/// @file flash_backward_spread_atomics.cuh
/// @brief Variant `spread_atomics`: hoisted with dQ's float2 atomics issued a few at a time
/// between the k-steps of dK's product, instead of all 16 back to back before the barrier.
///
/// What changed from `hoisted`, and why. hoisted's query tile ends with dQ's product and
/// then its 16 `REDG.E.ADD.F32x2` a lane in a row, just before the barrier that starts the
/// next tile. The global-memory queue of an SM partition takes only so many at once, so the
/// warp stalls on issuing them (Nsight Compute's `lg_throttle`: 0.31 cycles an instruction at
/// d = 128 and 0.42 at d = 64, where FlashAttention-2's backward has 0.01 and 0.00), and the
/// warps that finish first wait at the barrier for those still draining (0.74 against 0.24
/// at d = 128).
///
/// Here the three products after the barrier that publishes Pᵀ and dSᵀ run as dV, dQ, dK
/// (they read only what that barrier published, so any order computes the same), and dK's
/// product, which does not depend on dQ's, issues 16 / kQSteps of dQ's atomics before each
/// of its k-steps: 4 before each of 4 at d = 128, 2 before each of 8 at d = 64
/// (warp_product's before_step). Between two batches the warp issues a k-step's loads and
/// mma (6 ldmatrix and 16 mma at d = 128, 4 and 8 at d = 64), time in which the queue
/// drains; the last batch is followed by the last k-step. Moving the atomics alone is not enough: measured in the same run as an
/// experiment (`order_vqk`: dV, dQ with its 16 atomics in a row, then dK; README, "Why not
/// faster"), that ran 2.5% slower than hoisted at d = 128 and 1.6% faster at d = 64, and
/// Nsight Compute's lg_throttle rose (0.61 at d = 128): the queue is full either way when
/// 16 arrive at once. The products, the loads, the registers (ptxas -v: 254 at d = 128, 255
/// at d = 64, no spill, as hoisted) and the bytes are hoisted's.
///
/// Run: ./build/chapters/08_tensor_core_backward/ch08_tensor_core_backward --variant spread_atomics
#pragma once

#include "08_tensor_core_backward/flash_backward_hoisted.cuh"

namespace ch08 {

/// hoisted's tiles, warps and lane offsets, with dQ's product before dK's and its atomics
/// spread over dK's k-steps (flash_backward_warp_tiles' kernel, kSpreadAtomics).
template <class Element, int D_>
struct SpreadAtomicsTraits : HoistedTraits<Element, D_> {
  static constexpr bool kSpreadAtomics = true;
};

}  // namespace ch08
