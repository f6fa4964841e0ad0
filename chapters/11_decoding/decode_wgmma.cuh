/// @file decode_wgmma.cuh
/// @brief Chapter 11's step 6: a key/value head's rows on Hopper's warpgroup instruction,
/// 64 a warpgroup, one or two warpgroups a block, chapter 09's two products (sm_90a only).
///
/// Why: with g·N_q rows a key/value head every element of K and V meets g·N_q dot products
/// and g·N_q updates of O. At 128 rows (four query rows of 32 heads on one) that is 128
/// FLOPs a byte of cache, 590 TFLOP/s to keep up with the H200's memory: more than
/// mma.sync gives step 5, whose 16- or 32-row blocks also copy each K/V tile into shared
/// memory once a chunk of rows (from L2 after the first). wgmma takes 64 rows against 128
/// keys in one instruction, K and V read by the tensor cores from shared memory.
///
/// The block: one warpgroup (the chapter's four warps) for 64 rows of its (split, sequence
/// · key/value head), or two for 128, the group's rows packed as step 5 packs them (query
/// head, then query row); rows past the head's are zero queries, never written. K and V
/// arrive as in step 5 (KvRows, or KvPages through the block table, with two warpgroups each
/// row's offset found once a tile into shared memory; cp.async, two 128-key tiles in flight;
/// with two warpgroups one copies K, the other V), into the
/// 128-byte-swizzled panels wgmma reads (sm90/smem_layout.hpp), fenced for the tensor cores
/// before the barrier that publishes them. A tile is chapter 09's step 1: S = Q·Kᵀ (d/16
/// wgmma m64n128k16, Q and K from shared memory), the mask, the online softmax on the
/// accumulators, O += P·V (8 wgmma, P from registers, V MN-major), each waited for. A warp's rows are its own, over every key of
/// the split: nothing to merge across warps, each thread writes its two rows from registers,
/// to the workspace for decode_merge (or for this kernel's own merge after a grid barrier,
/// decode_grid_merge.cuh) or into shared memory for the cluster's merge (decode_cluster.cuh).
#pragma once

#include "09_hopper_forward/forward_tile.cuh"  // ch09::issue_qk, softmax_tile, pack_p, issue_pv
#include "11_decoding/decode_cluster.cuh"      // merge_in_cluster
#include "11_decoding/decode_grid_merge.cuh"   // merge_in_grid
#include "11_decoding/decode_mma.cuh"          // KvRows, KvPages, kTileKeys, kMmaStages
#include "sm90/smem_layout.hpp"
#include "sm90/wgmma.cuh"

namespace ch11 {

constexpr int kWgmmaRows = ft::sm90::kMmaM;  ///< rows a warpgroup: wgmma's m64
/// Warpgroups a block at most: two share each K/V tile between 128 rows (one copy of it for
/// them all), and one's softmax can run while the other's products do (one warpgroup alone
/// waits for each).
constexpr int kMaxWarpgroups = 2;

/// The shapes chapter 09's tile functions read: the element, d, 128 keys a tile (S's wgmma is
/// m64n128k16), Q's rows (64 a warpgroup) and a K/V tile as swizzled panels.
template <class Element, int D_, int kWarpgroups = 1>
struct WgmmaShape {
  using T = Element;
  static constexpr int D = D_;
  static constexpr int Bc = kTileKeys;
  using QTile = ft::sm90::Sw128Tile<kWgmmaRows * kWarpgroups, D>;
  using KvTile = ft::sm90::Sw128Tile<kTileKeys, D>;
};

/// Dynamic shared memory: 1024 bytes of slack to align the panels (the swizzle's period),
/// Q's rows, then kMmaStages tiles of K and of V: at d = 128 145 KB with one warpgroup, 161
/// KB with two (one block a SM); at d = 64 73 KB with one (three blocks a SM) or 81 KB with
/// two (whose registers then hold a SM to one block). Two warpgroups through pages add 2 KB
/// of static shared memory (row_offset).
template <int D, int kWarpgroups = 1>
constexpr size_t wgmma_smem_bytes() {
  using S = WgmmaShape<__nv_bfloat16, D, kWarpgroups>;
  return size_t(ft::sm90::kAtomBytes) + S::QTile::kBytes + 2 * kMmaStages * size_t(S::KvTile::kBytes);
}

/// How a launch of step 6 merges its splits (the host's choice: merges_in_cluster,
/// merges_in_grid in decoding.hpp).
enum class Merge {
  kWorkspace,  ///< each split's O and lse to the workspace, merged by decode_merge, a second kernel
  kCluster,    ///< the block one of a cluster of p.splits, the splits merged in shared memory (decode_cluster.cuh)
  kGrid,       ///< to the workspace, then merged by this grid after a barrier (decode_grid_merge.cuh)
};

/// Blocks a SM the kernel is built for: at d = 64 one warpgroup's 73 KB of shared memory leave
/// room for three, and the grid's merge, its loads in flight, would otherwise take registers
/// enough (193 a thread, ptxas) to hold a SM to two, and its one-wave grid would not fit.
template <int D, int kWarpgroups>
constexpr int kWgmmaBlocksPerSm = D == 64 && kWarpgroups == 1 ? 3 : 1;

template <class T, int D, bool kPaged, int kWarpgroups = 1, Merge kMerge = Merge::kWorkspace,
          bool kLengthFirst = false>
__global__ void __launch_bounds__(kThreads * kWarpgroups, (kWgmmaBlocksPerSm<D, kWarpgroups>))
    decode_wgmma(const Params<T> p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Shape = WgmmaShape<T, D, kWarpgroups>;
  using QTile = typename Shape::QTile;
  using KvTile = typename Shape::KvTile;
  static_assert(kThreads == ft::sm90::kWarpgroupThreads, "a warpgroup is the chapter's four warps");
  static_assert(kWarpgroups >= 1 && kWarpgroups <= kMaxWarpgroups, "one warpgroup, or two: one copies K, one V");
  constexpr int kRows = kWgmmaRows * kWarpgroups;  // the block's rows
  constexpr int kS = kTileKeys / 2, kO = D / 2;    // accumulator registers a thread: S, O
  constexpr int kStageElems = KvTile::kBytes / int(sizeof(T));
  let_merge_launch();

  extern __shared__ uint4 smem_raw[];  // decode_mma's declaration: one name, one type
  T* const Qs = reinterpret_cast<T*>(ft::sm90::align_shared(reinterpret_cast<uint8_t*>(smem_raw)));
  T* const Ks = Qs + QTile::kBytes / sizeof(T);
  T* const Vs = Ks + kMmaStages * kStageElems;

  const int wg = threadIdx.x / ft::sm90::kWarpgroupThreads;  // this warpgroup: the block's rows 64·wg on
  const int t = threadIdx.x % ft::sm90::kWarpgroupThreads;   // thread within it
  const int row0 = blockIdx.x * kRows;
  const int split = blockIdx.y;
  const int head = blockIdx.z;  // b·H_kv + h_kv
  const int rows = min(kRows, p.rows - row0);
  const int batch = head / p.heads_kv, h_kv = head % p.heads_kv;
  const int64_t first_row = (int64_t(batch) * p.heads_q + int64_t(h_kv) * p.group) * p.Nq + row0;
  const int Nk = kPaged ? p.seq_lens[batch] : p.Nk;
  const int causal_offset = kPaged ? Nk - p.Nq : p.causal_offset;
  const int k_begin = split * p.keys_per_split;
  const int k_end = min(Nk, k_begin + p.keys_per_split);
  const int num_tiles = k_end > k_begin ? (k_end - k_begin + kTileKeys - 1) / kTileKeys : 0;

  // Paged, two warpgroups: each row's offset found once a tile, thread t of the first
  // warpgroup row t, into shared memory two tiles ahead, and read there by the copies. Step
  // 5's KvPages, each thread finding its own 16 rows' pages, cost this kernel a third more
  // instructions than the contiguous cache, and 0.80-0.86x its time at 128 rows
  // (ch11_ncu_paged.txt, ch11_paged_rows_hybrid.csv); found once a row, 0.96-1.04x
  // (1.12-1.29x KvPages, the same file). With one warpgroup the same change measured
  // 0.93-1.00x KvPages at pages of 16 tokens (ch11_paged_rows_ab.csv), so one keeps KvPages.
  constexpr bool kSharedRows = kPaged && kWarpgroups == 2;
  static_assert(kTileKeys == kThreads, "a tile's rows found by the first warpgroup, a row a thread");
  __shared__ int64_t row_offset[2][kSharedRows ? kTileKeys : 1];  // [tile j % 2][row], -1: past k_end
  KvPages<D> pages;  // paged, one warpgroup: the next tile's table entries, as step 5 loads them
  if constexpr (kPaged && !kSharedRows) {  // the first tile's beside the length, as step 5's
    if constexpr (kLengthFirst) {
      if (num_tiles > 0) pages.load(p, batch, k_begin, k_end);
    } else {
      pages.load(p, batch, k_begin, first_entries_end(p, k_begin));  // no branch: issued at once
    }
  }
  auto find_rows = [&](int j) {
    if constexpr (kSharedRows) {
      if (j < num_tiles && threadIdx.x < kTileKeys) {
        const int key = k_begin + j * kTileKeys + threadIdx.x;
        row_offset[j % 2][threadIdx.x] = key < k_end ? paged_offset<D>(p, page_of(p, batch, key), h_kv, key) : -1;
      }
    }
  };
  find_rows(0);
  find_rows(1);
  if constexpr (kSharedRows) __syncthreads();  // tiles 0 and 1's offsets, before load_tile reads them
  auto load_tile = [&](int j) {  // step 5's copies, into the swizzled panels
    const int stage = j % kMmaStages, key0 = k_begin + j * kTileKeys;
    KvRows<D> kv_rows;
    if constexpr (kSharedRows) {
#pragma unroll
      for (int it = 0; it < KvRows<D>::kPasses; ++it) kv_rows.offset[it] = row_offset[j % 2][KvRows<D>::row(it)];
    } else if constexpr (kPaged) {
      pages.rows(kv_rows, p, h_kv, key0, k_end);
      if (j + 1 < num_tiles) pages.load(p, batch, key0 + kTileKeys, k_end);
    } else {
      kv_rows.find(p, batch, h_kv, key0, k_end);
    }
    if (kWarpgroups == 1 || wg == 0) kv_rows.template copy<KvTile>(Ks + stage * kStageElems, p.K);
    if (kWarpgroups == 1 || wg == 1) kv_rows.template copy<KvTile>(Vs + stage * kStageElems, p.V);
  };
  ft::tc::copy_tile_async<QTile, kRows, kThreads * kWarpgroups>(Qs, p.Q + (first_row - row0) * D, row0, p.rows,
                                                                ft::ContiguousRows{});
  if (num_tiles > 0) load_tile(0);
  ft::tc::cp_async_commit();

  // The block's row and query row of each of this thread's two rows (h = 0, 1); the mask's.
  int r_of[2], q_row[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    r_of[h] = wg * kWgmmaRows + ft::sm90::acc_row(t, 2 * h);
    q_row[h] = (row0 + r_of[h]) % p.Nq;
  }
  float o[kO];
#pragma unroll
  for (int i = 0; i < kO; ++i) o[i] = 0.f;
  ft::OnlineSoftmax row[2] = {ft::online_softmax_empty(), ft::online_softmax_empty()};
  const uint32_t q_addr = uint32_t(__cvta_generic_to_shared(Qs)) + wg * kWgmmaRows * ft::sm90::kSwizzleBytes;

  for (int j = 0; j < num_tiles; ++j) {
    if (j + 1 < num_tiles) {  // tile j+1 flies while tile j is computed
      load_tile(j + 1);
      ft::tc::cp_async_commit();
      ft::tc::cp_async_wait<1>();
    } else {
      ft::tc::cp_async_wait<0>();
    }
    ft::sm90::fence_proxy_async();  // cp.async's writes, before the tensor cores read them
    __syncthreads();
    const int stage = j % kMmaStages;
    const uint32_t k_addr = uint32_t(__cvta_generic_to_shared(Ks + stage * kStageElems));
    const uint32_t v_addr = uint32_t(__cvta_generic_to_shared(Vs + stage * kStageElems));

    float s[kS];
    ft::sm90::fence();
    ch09::issue_qk<Shape>(s, q_addr, k_addr);
    ft::sm90::commit();
    // Tile j + 2's offsets while S runs, into the half tile j's copies read (the barrier above
    // ordered every thread's load_tile(j + 1) after them); load_tile(j + 2) reads them after
    // this tile's last barrier.
    find_rows(j + 2);
    ft::sm90::wait<0>();
    ft::sm90::fence_registers(s);

    // Keys past the split and (causal) after a row's query: −∞. Only a tile that runs past
    // k_end or reaches the first query row's last key has any.
    const int key0 = k_begin + j * kTileKeys;
    if (key0 + kTileKeys > k_end || (p.causal && key0 + kTileKeys - 1 > causal_offset)) {
#pragma unroll
      for (int i = 0; i < kS; ++i) {
        const int key = key0 + ft::sm90::acc_col(t, i);
        if (key >= k_end || (p.causal && key > q_row[i % 4 / 2] + causal_offset)) s[i] = -INFINITY;
      }
    }
    ch09::softmax_tile(s, o, row, p.scale_log2);

    uint32_t pa[kTileKeys / ft::sm90::kMmaK][4];
    ch09::pack_p<T>(pa, s);
    ft::sm90::fence();
    ch09::issue_pv<Shape>(o, pa, v_addr);
    ft::sm90::commit();
    ft::sm90::wait<0>();
    ft::sm90::fence_registers(o);
    __syncthreads();  // every warp is done with this stage before it is refilled
  }
  if (num_tiles == 0) ft::tc::cp_async_wait<0>();  // Q landed, unused

  // This thread's two rows: O / l and the lse (natural log), the split's into the workspace,
  // or (kCluster) into the K/V stages, free after the last tile's barrier.
  constexpr bool kClusterMerge = kMerge == Merge::kCluster;
  float* const part = reinterpret_cast<float*>(Ks);
  static_assert(kClusterPartBytes<D, kRows> <= 2 * kMmaStages * size_t(KvTile::kBytes), "the part fits the stages");
  static_assert(kGridMergeBytes<D, kThreads * kWarpgroups> <= 2 * kMmaStages * size_t(KvTile::kBytes),
                "the grid merge's scratch fits the stages");
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float l = ft::quad_sum(row[h].l);
    if (r_of[h] >= rows) continue;
    if constexpr (kClusterMerge) {
      const float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
      for (int c = 0; c < kO / 4; ++c) {
        const int i = 4 * c + 2 * h;
        *reinterpret_cast<float2*>(part + r_of[h] * kPartStride<D> + ft::sm90::acc_col(t, i)) =
            make_float2(o[i] * inv, o[i + 1] * inv);
      }
      if (t % 4 == 0) part[kRows * kPartStride<D> + r_of[h]] = l > 0.f ? ft::online_lse({row[h].m, l}) : -INFINITY;
      continue;
    }
    const int64_t out_row = first_row + r_of[h];
    const float inv = l > 0.f ? 1.f / l : 0.f;  // a row that saw no key: O = 0, lse = −∞
    const float lse = l > 0.f ? ft::online_lse({row[h].m, l}) : -INFINITY;
    const int64_t part_row = int64_t(split) * p.total_rows + out_row;
#pragma unroll
    for (int c = 0; c < kO / 4; ++c) {
      const int i = 4 * c + 2 * h, col = ft::sm90::acc_col(t, i);
      if (p.splits == 1)
        *reinterpret_cast<uint32_t*>(p.O + out_row * D + col) = ft::tc::pack2<T>(o[i] * inv, o[i + 1] * inv);
      else
        *reinterpret_cast<float2*>(p.o_part + part_row * D + col) = make_float2(o[i] * inv, o[i + 1] * inv);
    }
    if (t % 4 == 0) (p.splits == 1 ? p.lse[out_row] : p.lse_part[part_row]) = lse;
  }
  if constexpr (kClusterMerge) merge_in_cluster<T, D, kRows, kThreads * kWarpgroups>(p, part, first_row, rows, split);
  if constexpr (kMerge == Merge::kGrid) merge_in_grid<T, D, kThreads * kWarpgroups>(p, Ks);
#else
  __trap();  // built without sm_90a: the host never launches it there (uses_wgmma)
#endif
}

}  // namespace ch11
