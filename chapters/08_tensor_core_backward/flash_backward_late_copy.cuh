/// @file flash_backward_late_copy.cuh
/// @brief Variant `late_copy`: pipelined_dk with the next query tile's copies issued after
/// Sᵀ's product instead of right after the barrier that starts the tile.
///
/// What changed from `pipelined_dk`, and why. Every warp leaves the barrier at the top of a
/// query tile at about the same time, and each then spends its first instructions on the
/// next tile's cp.async (Q, dO, L and D: the 64-bit source addresses, the test for a last
/// partial tile, nine or ten copies a thread) before its first ldmatrix: time in which no
/// warp of the block has an mma to issue. Nsight Compute (the source pages of
/// spread_atomics, N = 4096) counts the top of the loop at 128 executed instructions a warp
/// and tile against FlashAttention-2's 19, 7% of the samples against 3.6-3.9%. FA2 issues
/// its next tile's copies in the middle of the tile.
///
/// Here they follow Sᵀ's product: the warp has 32 mma in flight, and the exponentials after
/// them wait for the results anyway. The stage they fill (1 − st) was free from the barrier
/// on; the next tile's wait has the rest of this tile (dP, dV, dQ, dK) to let them land.
/// The products, the registers' use, the bytes are pipelined_dk's.
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
