/// @file flash_backward_spread_whole.cuh
/// @brief Variant `spread_whole` (NOT YET MEASURED: branch next/spread-whole-tiles): spread_atomics
/// with the test for rows past N made once a query tile instead of at every batch of atomics.
///
/// What changes from `spread_atomics`, and why. spread_atomics' batches of dQ atomics each
/// carry the test `whole || row < N` and a branch to a predicated path for the last, partial
/// tile, and Nsight Compute counted 1.22e9 executed instructions against FlashAttention-2's
/// 1.07e9 at B = 4, H = 16, N = 4096, d = 128 (1.56e9 against 1.45e9 at d = 64), with the
/// cycles between a warp's instructions already below FlashAttention-2's. Here the kernel
/// tests once a tile and runs one of two copies of dK's product: its atomics unconditional
/// for a whole tile, tested for the last one (KnownWhole in flash_backward_warp_tiles.cuh).
///
/// Forecast, before any run (static SASS counts, sm_90, the loop a whole tile runs, counted
/// with the partial copy left out): 1386 instructions at d = 128 against spread_atomics'
/// 1623 and hoisted's 1452; 1844 at d = 64 against 2122 and 1947. ptxas -v: 254 registers at
/// d = 128 (no spill); 255 at d = 64 with an 8-byte spill (bf16), to be looked at first. If
/// the executed instructions fall by that share and the cycles per instruction do not rise
/// (they will some: fewer independent instructions between the mma), the time falls up to
/// 10-15%, which would put it at or under FlashAttention-2's backward at both d.
///
/// Run: ./build/chapters/08_tensor_core_backward/ch08_tensor_core_backward --variant spread_whole
#pragma once

#include "08_tensor_core_backward/flash_backward_spread_atomics.cuh"

namespace ch08 {

/// spread_atomics with one test a tile for the rows past N.
template <class Element, int D_>
struct SpreadWholeTraits : SpreadAtomicsTraits<Element, D_> {
  static constexpr RowTests kRowTests = RowTests::kTwoCopies;
};

/// The alternative (variant spread_pred): each lane's four row tests once a tile, and the
/// atomics predicated on them: no second copy of dK's product. Static loop, sm_90: 1488
/// instructions at d = 128, 1965 at d = 64 (a whole tile executes about all of them); no
/// spill at either d.
template <class Element, int D_>
struct SpreadPredTraits : SpreadAtomicsTraits<Element, D_> {
  static constexpr RowTests kRowTests = RowTests::kPredicates;
};

/// The kernel-level form (variant spread_even): with N a multiple of Br no query tile
/// reaches past N, and this kernel has no row tests at all; the launch runs Ragged's
/// kernel (spread_pred's) for any other N. One copy of the loop, as spread_pred, and the
/// whole-tile loop of spread_whole.
template <class Element, int D_>
struct SpreadEvenTraits : SpreadAtomicsTraits<Element, D_> {
  static constexpr RowTests kRowTests = RowTests::kNone;
  using Ragged = SpreadPredTraits<Element, D_>;
};

}  // namespace ch08
