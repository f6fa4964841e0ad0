/// @file flash_backward_atomics_after.cuh
/// @brief Variant `atomics_after`: async_kv with each batch of dQ's atomics issued after its
/// k-step of dK's mma instead of before it, so that the last batch is not followed at once by
/// instructions that reuse its registers.
///
/// What changed from `async_kv`, and why. A REDG reads its address and data registers when
/// the memory pipeline takes it, not when the warp issues it; an instruction that writes one
/// of those registers waits for that read (Nsight Compute: long scoreboard). With the batches
/// before each k-step, the last batch is followed by dK's last k-step, whose mma ptxas gives
/// registers the batch's address had used: at d = 128 one HMMA of that k-step holds 20
/// thousand samples of long-scoreboard stall, 4% of the kernel's (source page of async_kv,
/// N = 4096, profiles/source_08_async_kv_d128.csv.gz).
///
/// Here warp_product_ahead runs each batch after its k-step's mma (kAfter): the first
/// k-step's mma go first, and the last batch ends the query tile, with the next tile's wait
/// and barrier between it and the next reuse. Batches, atomics and products are async_kv's.
///
/// Run: ./build/chapters/08_tensor_core_backward/ch08_tensor_core_backward --variant atomics_after
#pragma once

#include "08_tensor_core_backward/flash_backward_async_kv.cuh"

namespace ch08 {

/// async_kv, each batch of dQ's atomics after its k-step of dK's mma.
template <class Element, int D_>
struct AtomicsAfterTraits : AsyncKvTraits<Element, D_> {
  static constexpr bool kAtomicsAfter = true;
};

}  // namespace ch08
