/// @file flash_backward_loads_first.cuh
/// @brief Variant `loads_first`: spread_atomics with each batch of dQ's atomics issued after
/// its dK k-step has asked for its A fragments, instead of before.
///
/// What changes from `spread_atomics`, and why. Nsight Compute's stall sampling per SASS
/// instruction (N = 4096, B = 4, d = 64; README, "Why not faster: where the warps wait")
/// put a quarter of the key-block kernel's samples in dK's product, twice dV's share for the
/// same 64 mma, most of them stalls on a shared-memory result (`short_scoreboard`). Each
/// batch of atomics sits behind the branch that tests the tile for rows past N, and nothing
/// moves across a branch: each k-step's ldmatrix start only after its batch, and its mma
/// wait for them. Here the k-step's A loads (dSᵀ, 2 ldmatrix) go first, the batch
/// (2 atomics at d = 64, 4 at d = 128, and its test) runs while they are in flight, then the
/// B loads and the mma. The same instructions, in another order; no register more.
///
/// Forecast, before any run: dK's `short_scoreboard` samples fall; if they halve, the
/// kernel is a few percent faster at d = 64 (dK's phase is about a quarter of its time).
///
/// Run: ./build/chapters/08_tensor_core_backward/ch08_tensor_core_backward --variant loads_first
#pragma once

#include "08_tensor_core_backward/flash_backward_spread_atomics.cuh"

namespace ch08 {

/// spread_atomics with each batch after its k-step's A loads.
template <class Element, int D_>
struct LoadsFirstTraits : SpreadAtomicsTraits<Element, D_> {
  static constexpr bool kAtomicsAfterLoads = true;
};

}  // namespace ch08
