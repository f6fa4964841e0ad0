/// @file decode_grid_merge.cuh
/// @brief Chapter 11's step 6, its splits merged inside the decode kernel after a barrier
/// across the whole grid: no second kernel.
///
/// Why: past eight splits a cluster cannot hold a (chunk, head)'s splits (decode_cluster.cuh),
/// and the merge is a second kernel, decode_merge, that starts when the decode grid has
/// drained. On the H200 it took 4.8-6.4 µs whatever its bytes (2.1 to 8.5 MB of partial
/// results), beside a decode kernel of 10.6-29.4 µs at B = 1 (the chapter's case study): the
/// latency of a grid that starts, reads once and ends. But step 6's grid is one wave
/// (choose_splits never asks for more blocks than the GPU holds at once), so its blocks can
/// wait for each other instead:
///
///     every block: its split's tiles ...... O_s / l_s and lse_s into the workspace, as for decode_merge
///     grid.sync() ......................... every split of every row written, and visible to every block
///     block b of G: rows b, b + G, ... merged (decode_merge's code; a row a block, or a slice of one), O written
///
/// A barrier across blocks is safe only when every block is resident at once: a block still
/// waiting for an SM would never arrive, and the others would wait forever. So the host
/// launches this form *cooperatively* (cudaLaunchAttributeCooperative), which makes the
/// runtime refuse a grid that does not fit at once, and takes it only where the grid fits
/// and no block would merge two rows (merges_in_grid in decoding.hpp: 1.00-1.06x the step
/// with decode_merge at B = 1 on an H100: a barrier of 1.15 µs in place of a second
/// kernel's launch). cooperative_groups' grid.sync() is a counter in device
/// memory that each block's first thread increments with release semantics and then polls
/// with acquire semantics (GPU scope), a block barrier on either side: every block's stores
/// before it are visible to every block after it, to plain loads.
#pragma once

#include <cooperative_groups.h>

#include "11_decoding/decode_kernels.cuh"  // Params, MergeScratch, merge_block_rows

namespace ch11 {

/// The rows a block merges at a time in the grid's merge: one, so that at B = 1 (32 to 128
/// rows in all, on a grid of 132 blocks) every row has a block to itself.
constexpr int kGridMergeRows = 1;

/// Shared memory the grid's merge takes (it reuses the K/V stages, free by then): a float4 a
/// thread at every slicing, and a maximum and a sum a slot, most with four slices (the most
/// slots).
template <int D, int kBlockThreads>
constexpr size_t kGridMergeBytes = sizeof(MergeScratch<D / 4, kGridMergeRows, kBlockThreads>);

/// The rows of the launch, each cut into kSlices slices of its columns, merged by the grid's
/// blocks in turn: block b takes the slices b, b + G, b + 2G, ... of the G blocks.
template <class T, int D, int kBlockThreads, int kSlices>
__device__ __forceinline__ void merge_slices(const Params<T>& p, void* scratch) {
  constexpr int kCols = D / kSlices;
  using Scratch = MergeScratch<kCols, kGridMergeRows, kBlockThreads>;
  static_assert(sizeof(Scratch) <= kGridMergeBytes<D, kBlockThreads>, "the scratch the kernel set aside");
  auto& merge = *static_cast<Scratch*>(scratch);
  const int64_t blocks = int64_t(gridDim.x) * gridDim.y * gridDim.z;
  const int64_t block = blockIdx.x + int64_t(gridDim.x) * (blockIdx.y + int64_t(gridDim.y) * blockIdx.z);
  for (int64_t slice = block; slice < p.total_rows * kSlices; slice += blocks) {
    merge_block_rows<T, D, kGridMergeRows, kBlockThreads, kCols>(p.o_part, p.lse_part, p.O, p.lse, p.total_rows,
                                                                 p.splits, slice / kSlices, merge,
                                                                 int(slice % kSlices) * kCols);
    __syncthreads();  // every thread done with the scratch before the next slice's merge writes it
  }
}

/// Every query row of the launch merged from its splits in the workspace, after every block
/// of the grid has written its own: the grid's blocks take the rows in turn, each row cut into
/// p.merge_slices slices of its columns (1, 2 or 4: grid_merge_slices in decoding.hpp, where
/// a whole row's threads would load its splits in two batches or more). `scratch` is
/// kGridMergeBytes of this block's shared memory. Every thread of every block calls it.
template <class T, int D, int kBlockThreads>
__device__ __forceinline__ void merge_in_grid(const Params<T>& p, void* scratch) {
  namespace cg = cooperative_groups;
  if (p.splits < 2) return;  // one split wrote O itself (the host never asks this form for it)
  cg::grid_group grid = cg::this_grid();
  if (!grid.is_valid()) __trap();  // launched without the cooperative attribute: a host bug, never a hang
  grid.sync();  // every split's O and lse in the workspace, and seen here
  if (p.merge_slices == 4) merge_slices<T, D, kBlockThreads, 4>(p, scratch);
  else if (p.merge_slices == 2) merge_slices<T, D, kBlockThreads, 2>(p, scratch);
  else merge_slices<T, D, kBlockThreads, 1>(p, scratch);
}

}  // namespace ch11
