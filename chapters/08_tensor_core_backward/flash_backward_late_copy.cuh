/// @file flash_backward_late_copy.cuh
/// @brief Variant `late_copy`: pipelined_dk with the next query tile's copies issued after
/// Sᵀ's product instead of right after the barrier that starts the tile.
///
/// What changed from `pipelined_dk`, and why. Every warp leaves the barrier at the top of a
/// query tile at about the same time, and each then spends its first instructions on the
/// next tile's cp.async (Q, dO, L and D: the 64-bit source addresses, the test for a last
/// partial tile, up to nine copies a thread) before its first ldmatrix: time in which no
/// warp of the block has an mma to issue. Nsight Compute (the source pages of
/// spread_atomics, N = 4096) counts the top of the loop at about 130 (d = 64) and 120
/// (d = 128) executed instructions a warp and tile against FlashAttention-2's 19, 7% of the
/// samples against 3.6-3.9%. FA2 issues its next tile's copies in the middle of the tile.
///
/// Here they follow Sᵀ's product: the warp has just issued its 64 mma, and the exponentials
/// after them wait for the results anyway. The stage they fill (1 − st) was free from the barrier
/// on; the next tile's wait has the rest of this tile (dP, dV, dQ, dK) to let them land.
/// The products and the bytes are pipelined_dk's. Measured: the top of the loop 23
/// executed instructions a warp and tile (ptxas now keeps the lane offsets there), and
/// 1.8-2.3% faster at d = 64, 0.4-0.8% at d = 128 (tc_variants.csv, N = 4096 and 16384).
///
/// Run: ./build/chapters/08_tensor_core_backward/ch08_tensor_core_backward --variant late_copy
#pragma once

#include "08_tensor_core_backward/flash_backward_pipelined_dk.cuh"

namespace ch08 {

/// pipelined_dk, the next query tile's copies after Sᵀ's product.
template <class Element, int D_>
struct LateCopyTraits : PipelinedDkTraits<Element, D_> {
  static constexpr bool kLateCopy = true;
};

}  // namespace ch08
