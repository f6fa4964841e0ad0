/// @file flash_backward_pipelined_dk.cuh
/// @brief Variant `pipelined_dk`: spread_atomics with dK's fragments loaded a k-step ahead, so
/// that the branches around the dQ atomics no longer stand between an ldmatrix and its mma.
///
/// What changed from `spread_atomics`, and why. spread_atomics issues a batch of dQ's atomics
/// before each of dK's k-steps, each batch behind a test (`whole || row < N`), and a branch
/// ends a basic block: ptxas schedules within one, so each k-step's loads start after the
/// batch and its first mma waits for them. Nsight Compute's per-instruction samples show it
/// (profiles/source_08_spread_atomics_d64.csv.gz, N = 4096): at d = 64 the first HMMA of each
/// of dK's 8 k-steps takes 6.7 to 8.5 thousand samples, waiting on its ldmatrix (short
/// scoreboard), and dK's phase 131.6 thousand against 59.1 in FlashAttention-2's backward;
/// in dV's product, with no branch in it, ptxas interleaves the next loads with the mma.
///
/// Here dK's product is warp_product_ahead (flash_backward_warp_tiles.cuh): k-step ks + 1's
/// A and B fragments are requested, then the batch of atomics, then k-step ks's mma, whose
/// fragments were requested a k-step (and a batch) earlier. The cost: a second set of dK's
/// fragment registers, 16 at d = 64 and 24 at d = 128 (ptxas -v: 254 registers at both d,
/// no spill). The products, the atomics, the bytes are spread_atomics'. Measured
/// (tc_variants.csv, bf16, N = 4096 and 16384): 1.3-1.7% faster at d = 64, 0.1-0.2% at
/// d = 128; the waits went partly elsewhere (README, "Why not faster: dq_pointer").
///
/// Run: ./build/chapters/08_tensor_core_backward/ch08_tensor_core_backward --variant pipelined_dk
#pragma once

#include "08_tensor_core_backward/flash_backward_spread_atomics.cuh"

namespace ch08 {

/// spread_atomics, with dK's product through warp_product_ahead.
template <class Element, int D_>
struct PipelinedDkTraits : SpreadAtomicsTraits<Element, D_> {
  static constexpr bool kDkAhead = true;
};

}  // namespace ch08
