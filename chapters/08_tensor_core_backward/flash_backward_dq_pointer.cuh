/// @file flash_backward_dq_pointer.cuh
/// @brief Variant `dq_pointer`: late_copy with each of dQ's atomics addressed as one pointer
/// of the tile plus an immediate, instead of an address rebuilt for every atomic.
///
/// What changed from `late_copy`, and why. The lane's 16 atomics of a query tile go to
/// dq_tile + step, the steps compile-time constants (the pair's row and column in the warp's
/// dQ tile). Written so, the optimizer nevertheless folds pointer and step into one index
/// (the lane's offsets and the steps share no bit, so it joins them with an OR) and rebuilds
/// each 64-bit address from it: `LOP3`, `IADD3`, `IMAD.X`, `LEA`, `LEA.HI.X` before every
/// `REDG` (cuobjdump -sass of late_copy, d = 128; about as many at d = 64), in the middle
/// of dK's product, where they hold registers the loads a k-step ahead also want.
///
/// Here the tile's index passes through tc::opaque (common/sm80/opaque.cuh), which the
/// optimizer cannot see through: each atomic is `REDG [dq_tile + immediate]`, and the loop
/// is 9% (d = 128) and 7% (d = 64) shorter (1430 and 1930 instructions, static). The
/// atomics, their order and their tests are late_copy's. Measured (tc_variants.csv, bf16,
/// N = 4096 and 16384): 0.1-0.5% faster than late_copy; the fastest variant, at both d.
///
/// Run: ./build/chapters/08_tensor_core_backward/ch08_tensor_core_backward --variant dq_pointer
#pragma once

#include "08_tensor_core_backward/flash_backward_late_copy.cuh"

namespace ch08 {

/// late_copy, dQ's atomics from one opaque pointer a tile.
template <class Element, int D_>
struct DqPointerTraits : LateCopyTraits<Element, D_> {
  static constexpr bool kDqPointer = true;
};

}  // namespace ch08
