/// @file flash_backward_split_tail.cuh
/// @brief Variant `split_tail`: dq_pointer with the key tiles of the grid's partial last
/// wave cut into runs of query tiles, a block each, so that no SM idles while a few finish.
///
/// What changed from `dq_pointer`, and why. Non-causal, every key tile is the same work
/// (all ceil(N / Br) query tiles), and the kernel holds one block an SM. The comparison's
/// grids are 4096 key tiles (d = 64) or 2048 (d = 128) on the H200's 132 SMs: 31.03 and
/// 15.52 waves. The last wave runs 4 (d = 64) or 68 (d = 128) blocks while the other SMs
/// wait, so the kernel takes 32 (16) block times where 31.03 (15.52) would do: 3.0% of
/// its time, at either d, SMs idle. (Causal tiles differ in length, and cutting them is
/// another plan: split_tail leaves them alone. scripts/wave_schedule.py counts both.)
///
/// Here (tail_split.hpp) each key tile of the last wave is cut into `parts` runs of its
/// query tiles, each run a block of its own: at d = 64 the 4 tiles into 32 runs (4 query
/// tiles each at N = 16384, one at 4096), 128 blocks in one round; at d = 128 the 68 tiles
/// into 13 runs of 19-20 query tiles (N = 16384) or 5 of 12-13 (N = 4096): 7 and 3 rounds
/// of short blocks, a last wave of 147 or 42 query tiles' time where the uncut one takes 256 or 64.
/// A run holds only part of its tile's sums over the queries, so it cannot store dK and dV:
/// it adds its part (float32 atomics, as dQ's) into the tile's slot in the workspace, and
/// store_shared_tiles (below) rounds and stores the slots after the kernel. The cost: K and
/// V loaded once a run, the slots (68 × 2 · Bc · d floats at d = 128: 8.9 MB; 0.26 MB at
/// d = 64), their zeroing and one small kernel; and the workspace holds room for 160 of
/// them whatever the GPU (tail_split.hpp, kMaxCutTiles: 10 MB at d = 64, 21 MB at d = 128).
/// dK and dV of a cut tile are float32 atomic sums, as dQ is: their last bits may differ
/// from run to run. Every other block runs dq_pointer's code.
/// Forecast (the plan's own count, tail_split.hpp): 2.9-3.0% faster non-causal at d = 64,
/// 2.7% (N = 16384) and 2.2% (4096) at d = 128; causal unchanged (never cut). Measured on
/// the H200 (README, "split_tail, the last wave"; two runs): 2.1-2.9% non-causal at
/// N = 4096 and 16384, -0.1% to +0.4% at N = 1024; causal within 0.5% of dq_pointer,
/// either way.
///
/// Run: ./build/chapters/08_tensor_core_backward/ch08_tensor_core_backward --variant split_tail
#pragma once

#include "08_tensor_core_backward/flash_backward_dq_pointer.cuh"
#include "schedule/tail_split.hpp"

namespace ch08 {

/// dq_pointer, the last wave's key tiles cut into runs of query tiles (non-causal).
template <class Element, int D_>
struct SplitTailTraits : DqPointerTraits<Element, D_> {
  static constexpr bool kSplitTail = true;
};

/// Cut tile j's dK and dV: its slot's float32 sums rounded to the dtype, rows past N left
/// alone. One block a cut tile. kViews: dK and dV where their strides say.
template <class T, int D, int Bc, bool kViews>
__global__ void store_shared_tiles(const Params<T> p, const TailSplit split,
                                   const ft::ViewArgs views) {
  const int64_t tile = split.first + blockIdx.x;
  const int64_t head = tile / p.num_kv_tiles;
  const int k0 = int(tile % p.num_kv_tiles) * Bc;
  const float* dk = split.slots + blockIdx.x * split.slot_floats;
  const float* dv = dk + Bc * D;
  for (int e = 2 * threadIdx.x; e < Bc * D; e += 2 * blockDim.x) {  // a pair a thread: 8-byte loads
    const int row = e / D, col = e % D;
    if (k0 + row >= p.N) break;  // the rows are in order: the rest are past N too
    int64_t at_k = (head * p.N + k0 + row) * D + col, at_v = at_k;  // contiguous
    if constexpr (kViews) {
      at_k = ft::head_start(views.strides.dK, head, views.heads) + (k0 + row) * views.strides.dK.row + col;
      at_v = ft::head_start(views.strides.dV, head, views.heads) + (k0 + row) * views.strides.dV.row + col;
    }
    const float2 k = *reinterpret_cast<const float2*>(dk + e), v = *reinterpret_cast<const float2*>(dv + e);
    p.dK[at_k] = from_float<T>(k.x);
    p.dK[at_k + 1] = from_float<T>(k.y);
    p.dV[at_v] = from_float<T>(v.x);
    p.dV[at_v + 1] = from_float<T>(v.y);
  }
}

}  // namespace ch08
