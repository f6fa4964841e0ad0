/// @file flash_backward_staged_stores.cuh
/// @brief Variant `staged_stores`: late_copy with dK and dV staged through shared memory
/// and written in 16-byte chunks, whole rows a warp.
///
/// What changed from `late_copy`, and why. After its last query tile each warp writes its
/// 32 keys × d/2 columns of dK and dV straight from the accumulators: a 4-byte store per
/// pair of elements, each behind its own test of the key against N, 32 (d = 64) or 64
/// (d = 128) stores a lane, and a warp's 32 lanes touch 8 rows in 16-byte pieces. Nsight
/// Compute puts 9.9 thousand samples there at d = 128 (N = 4096), against 3.7 thousand for
/// FlashAttention-2's epilogue, which goes through shared memory.
///
/// Here, after a barrier (the last tile's dQ product reads Ks), the warps round dK into Ks
/// and dV into Vs (the layout the tiles were read with: the same conflict-free pair stores
/// as Pᵀ's), and after a second barrier the block writes both tiles back as it read them
/// (tc::store_tile_sync): 16 bytes a lane, a warp's lanes over whole rows, one test a row.
/// The loop is late_copy's; only the epilogue changed, once per block.
///
/// Run: ./build/chapters/08_tensor_core_backward/ch08_tensor_core_backward --variant staged_stores
#pragma once

#include "08_tensor_core_backward/flash_backward_late_copy.cuh"

namespace ch08 {

/// late_copy, dK and dV through Ks and Vs on the way out.
template <class Element, int D_>
struct StagedStoresTraits : LateCopyTraits<Element, D_> {
  static constexpr bool kStagedStores = true;
};

}  // namespace ch08
