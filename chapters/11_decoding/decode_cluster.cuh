/// @file decode_cluster.cuh
/// @brief Chapter 11's step 6, its splits merged in a thread block cluster: each split's
/// partial result stays in its block's shared memory, and the blocks of one (chunk,
/// sequence · key/value head) read each other's through distributed shared memory (sm_90).
///
/// Why: with splits, a decode step is two kernels. The decode writes each split's
/// normalized O and lse to a float32 workspace; the merge (decode_merge), launched behind it,
/// waits for the whole grid to finish, reads them back and writes O. At short caches, where
/// the bytes take a few microseconds, the second launch and the grid's drain between the
/// two are a large share of the step. On Hopper, blocks launched as one *cluster* run at
/// the same time on SMs of one GPC and may read each other's shared memory; a block's
/// rows then need nothing from device memory to be merged:
///
///     the cluster: (chunk, head), splits s = 0 .. S-1 side by side (cluster dims 1 × S × 1)
///     block s:  its split's tiles ......... O_s / l_s and lse_s into its shared memory
///               cluster.sync() ............ every split's partial result written and visible
///               rows r ≡ s (mod S): O = Σ_k w_k O_k / Σ_k w_k, w_k = e^(lse_k − max_k lse_k),
///                                   O_k and lse_k read from block k's shared memory
///               cluster.sync() ............ no block leaves while another still reads it
///
/// The merge is chapter 03's, once over S ≤ 8 partial results. A cluster's blocks must fit
/// the GPC together, and a grid's clusters fill the SMs less evenly than single blocks do, so
/// the host takes this path only where every cluster of the grid runs at once, and where a
/// block's part is at most 16 KB (larger ones, read from the other SMs, lost to the
/// workspace: merges_in_cluster in decoding.hpp).
#pragma once

#include <cooperative_groups.h>

#include "11_decoding/decode_kernels.cuh"  // Params
#include "sm80/pack.cuh"                    // ft::tc::pack2

namespace ch11 {

/// The most splits merged in a cluster: 8 blocks is the cluster size every Hopper GPU
/// accepts without opting in to larger ("portable").
constexpr int kMaxClusterSplits = 8;

/// A split's partial result in its block's shared memory: kRows rows of d floats (O / l),
/// each padded by eight floats, then kRows lse. A half warp stores float2s for four
/// accumulator rows, 8 banks a row: rows 8 banks apart take the 32 banks once, where rows
/// of d floats would all start on bank 0 (4-way conflicts) and d + 4 would overlap by half
/// (2-way; 16 against 8.5 cycles a store instruction on an H100).
template <int D>
constexpr int kPartStride = D + 8;

/// Shared memory a split's partial result takes (it reuses the K/V stages, free by then).
template <int D, int kRows>
constexpr size_t kClusterPartBytes = (size_t(kRows) * kPartStride<D> + kRows) * sizeof(float);

/// O and lse of the rows r < `rows` with r ≡ `split` (mod splits), merged from the cluster's
/// splits: `part` is this block's partial result (kClusterPartBytes), at the same offset in
/// every block of the cluster. Each row takes d/4 threads of the block, four columns each;
/// a row of O is row `first_row` + r. Every thread of the block calls it (two cluster
/// barriers).
template <class T, int D, int kRows, int kBlockThreads>
__device__ __forceinline__ void merge_in_cluster(const Params<T>& p, float* part, int64_t first_row, int rows,
                                                 int split) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  constexpr int kGroups = D / 4;                          // threads across a row, four columns each
  constexpr int kRowsAPass = kBlockThreads / kGroups;     // rows the block merges at once
  static_assert(kBlockThreads % kGroups == 0, "whole rows a pass");
  cg::cluster_group cluster = cg::this_cluster();
  const int splits = p.splits;  // the cluster's blocks: rank s is split s (cluster dims 1 × S × 1)
  if (cluster.num_blocks() != unsigned(splits)) __trap();  // launched otherwise: a host bug, never a wrong O
  cluster.sync();               // every split's part written (release), and seen here (acquire)

  const int group = threadIdx.x % kGroups;
  for (int r = split + threadIdx.x / kGroups * splits; r < rows; r += kRowsAPass * splits) {
    float x[kMaxClusterSplits];  // each split's lse of row r; −∞ for an empty split
    float m = -INFINITY;
#pragma unroll
    for (int s = 0; s < kMaxClusterSplits; ++s) {
      x[s] = s < splits ? cluster.map_shared_rank(part, s)[kRows * kPartStride<D> + r] : -INFINITY;
      m = fmaxf(m, x[s]);
    }
    float l = 0.f;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    if (m != -INFINITY) {  // some split saw a key of this row
#pragma unroll
      for (int s = 0; s < kMaxClusterSplits; ++s) {
        if (s >= splits) break;
        const float w = __expf(x[s] - m);  // an empty split: 0
        const float4 o = *reinterpret_cast<const float4*>(cluster.map_shared_rank(part, s) + r * kPartStride<D> + 4 * group);
        l += w;
        acc.x += w * o.x, acc.y += w * o.y, acc.z += w * o.z, acc.w += w * o.w;
      }
    }
    const float inv = l > 0.f ? 1.f / l : 0.f;  // a row no split saw: O = 0, lse = −∞
    *reinterpret_cast<uint2*>(p.O + (first_row + r) * D + 4 * group) =
        make_uint2(ft::tc::pack2<T>(acc.x * inv, acc.y * inv), ft::tc::pack2<T>(acc.z * inv, acc.w * inv));
    if (group == 0) p.lse[first_row + r] = l > 0.f ? m + __logf(l) : -INFINITY;
  }
  cluster.sync();  // this block's part stays until every block of the cluster has read it
#endif
}

}  // namespace ch11
