/// @file flash_backward_async_kv.cuh
/// @brief Variant `async_kv`: dq_pointer with the block's K and V copied by cp.async, in one
/// group with the first query tile, instead of by plain loads and stores before the loop.
///
/// What changed from `dq_pointer`, and why. A block starts by starting its first query
/// tile's copies and then copying K and V through registers (tc::copy_tile_sync): each
/// thread's loads of a tile go out together, but its stores to shared memory wait for them,
/// and V's loads start only after K's stores. Nsight Compute counts what runs once a block
/// (the code before and after the loop) at 13 thousand samples against FlashAttention-2's 6
/// at d = 128, N = 4096 (the "other" row of profiles/stall_phases.txt), and at N = 4096 a
/// block walks only 64 (d = 128) or 32 (d = 64) query tiles, half that under the causal mask.
///
/// Here K and V go by cp.async (tc::TileCopy, as the query tiles do), issued before the first
/// query tile's copies and committed with them: all of a block's first loads in flight at
/// once, no registers held for them, and the loop's first wait and barrier cover all three.
/// The loop is dq_pointer's.
///
/// Run: ./build/chapters/08_tensor_core_backward/ch08_tensor_core_backward --variant async_kv
#pragma once

#include "08_tensor_core_backward/flash_backward_dq_pointer.cuh"

namespace ch08 {

/// dq_pointer, K and V by cp.async with the first query tile.
template <class Element, int D_>
struct AsyncKvTraits : DqPointerTraits<Element, D_> {
  static constexpr bool kAsyncKv = true;
};

}  // namespace ch08
