/// @file decode_mma.cuh
/// @brief Chapter 11's step 5: the query rows that share a key/value head (g·N_q of them, 16
/// or 32 a block) scored and weighted on the tensor cores, chapter 07's warp-level products
/// with the rows as the M dimension of `mma.sync.m16n8k16`.
///
/// Why: with g·N_q rows a key/value head, every key costs g·N_q dot products and g·N_q
/// updates of O. On the CUDA cores that is g·N_q multiply-adds per element read, more than
/// the H200's FFMA rate can feed at the memory's speed from about four rows on (the
/// lesson's regime paragraph). One m16n8k16 takes 16 rows against 8 keys at once.
///
/// The block: four warps, one (chunk of rows, split, sequence·key/value head). A chunk is
/// kRowTiles m16 tiles of rows: one for up to 16 rows, two for more (32 heads on one), so
/// that each K and V fragment a warp loads serves 32 rows where two 16-row blocks would each
/// load it (a block takes in its tiles at a fixed pace: the case study). Past 32 rows the
/// chunks of one split are neighbours in the grid, so that the group reads its keys from
/// device memory once and from L2 for the other chunks. Each block tile is 128
/// keys, copied by the whole block with cp.async into swizzled shared memory, two tiles in
/// flight (chapter 07's pipeline), each row's address from kv_offset (the contiguous cache or
/// a view of a longer one: KvRows) or, paged, from block-table entries loaded a tile ahead
/// (KvPages); warp w computes keys 32w…32w+31 of it: S = Q·Kᵀ (16 × 32 a row tile:
/// four accumulator tiles), the online softmax on the fragments, O += P·V with P's A
/// fragments taken from S's accumulators in place. Rows past the block's
/// rows are zero queries, never written. At the end the four warps' (m, l, O) go through
/// shared memory and write_block_rows merges them, as in decode_split.
#pragma once

#include "11_decoding/decode_kernels.cuh"
#include "cuda_core/online_softmax.cuh"
#include "cuda_core/reduce.cuh"  // ft::quad_max, ft::quad_sum
#include "sm80/cp_async.cuh"
#include "sm80/ldmatrix.cuh"
#include "sm80/mma.cuh"
#include "sm80/pack.cuh"
#include "sm80/swizzle.hpp"

namespace ch11 {

constexpr int kMmaRows = 16;                    ///< rows an m16 tile: a block has one or two (kRowTiles)
/// Row tiles a block at most: two tiles' O accumulators are 128 floats a thread at d = 128,
/// which with S and the fragments nearly fill the 255 registers (ptxas at d = 128: none on
/// sm_90a and 40 bytes on sm_80 for the contiguous cache, 200-212 and 148 through pages).
constexpr int kMaxRowTiles = 2;
constexpr int kWarpKeys = 32;                   ///< keys a warp a block tile: four n8 tiles
constexpr int kTileKeys = kWarps * kWarpKeys;   ///< 128 keys a block tile
constexpr int kMmaStages = 2;                   ///< block tiles in shared memory: one computed, one in flight

template <int D>
using MmaTile = ft::tc::SwizzledTile<D>;  ///< conflict-free ldmatrix rows (sm80/swizzle.hpp)

/// Dynamic shared memory: Q's 16·kRowTiles rows, then kMmaStages block tiles of K and of V;
/// the warps' partial results reuse the K/V space at the end.
template <int D, int kRowTiles = 1>
constexpr size_t mma_smem_bytes() {
  constexpr size_t q = size_t(ft::tc::tile_bytes<MmaTile<D>>(kMmaRows * kRowTiles));
  constexpr size_t kv = 2 * kMmaStages * size_t(ft::tc::tile_bytes<MmaTile<D>>(kTileKeys));
  static_assert(sizeof(float) * kWarps * kMmaRows * kRowTiles * (D + 2) <= kv,
                "the warps' partial results fit where the K/V tiles were");
  return q + kv;
}

/// The rows of K and V (the same layout) this thread copies for the block tile of keys
/// [key0, key0 + kTileKeys) of sequence b, key/value head h_kv: their offsets, all found before
/// any copy starts, so that the copies issue back to back. (With each offset computed between
/// two cp.async statements, asm that orders memory, the kernel ran at 0.85 of the read at
/// B >= 16 where this form runs at 1.00: ch11_tensor_cores_copies.csv.)
template <int D>
struct KvRows {
  static constexpr int kChunksPerRow = D / ft::tc::kChunkElems;  ///< 16-byte chunks a row
  static constexpr int kRowsPerPass = kThreads / kChunksPerRow;   ///< rows the block copies at once
  static constexpr int kPasses = kTileKeys / kRowsPerPass;        ///< rows a thread copies a tile
  int64_t offset[kPasses];  ///< element offsets of the thread's rows (-1: past k_end, zeros)

  /// The thread's place among the kThreads that copy a tile: the block's four warps, or in
  /// a block of several warpgroups (decode_wgmma) each warpgroup's, one copying K, one V.
  static __device__ __forceinline__ int copier() { return threadIdx.x % kThreads; }
  /// The tile's row (0…kTileKeys−1) this thread copies on pass `it`: the rows find() reads.
  static __device__ __forceinline__ int row(int it) { return copier() / kChunksPerRow + it * kRowsPerPass; }

  template <class T>
  __device__ __forceinline__ void find(const Params<T>& p, int b, int h_kv, int key0, int k_end) {
    const int r0 = copier() / kChunksPerRow;
#pragma unroll
    for (int it = 0; it < kPasses; ++it) {
      const int key = key0 + r0 + it * kRowsPerPass;
      offset[it] = key < k_end ? kv_offset<D>(p, b, h_kv, key) : -1;
    }
  }

  /// Starts copying those rows of `cache` (p.K or p.V) into `tile`.
  template <class Tile, class T>
  __device__ __forceinline__ void copy(T* tile, const T* cache) const {
    const int r0 = copier() / kChunksPerRow, col = copier() % kChunksPerRow * ft::tc::kChunkElems;
#pragma unroll
    for (int it = 0; it < kPasses; ++it)
      ft::tc::cp_async_16(tile + Tile::offset(r0 + it * kRowsPerPass, col),
                          offset[it] >= 0 ? cache + offset[it] + col : cache, offset[it] >= 0);
  }
};

/// A paged cache's block-table entries for the rows a thread copies of one block tile, loaded
/// a tile ahead of the copies that use them: found one at a time in front of the copies, as
/// KvRows::find does, each tile waited for its table loads with nothing else in flight to
/// cover them (the tensor-core kernel then ran at 0.38-0.72x its contiguous cache).
template <int D>
struct KvPages {
  using Rows = KvRows<D>;
  int page[Rows::kPasses];  ///< the pages of the thread's rows

  /// Starts loading the entries of keys [key0, key0 + kTileKeys) of sequence b. A row at or past
  /// k_end loads the last key's entry, unused: every load is unconditional, no branch. k_end may
  /// lie past the sequence's own end, within the batch's longest (first_entries_end).
  template <class T>
  __device__ __forceinline__ void load(const Params<T>& p, int b, int key0, int k_end) {
    const int r0 = Rows::copier() / Rows::kChunksPerRow;
#pragma unroll
    for (int it = 0; it < Rows::kPasses; ++it) page[it] = page_of(p, b, min(key0 + r0 + it * Rows::kRowsPerPass, k_end - 1));
  }

  /// The rows' offsets for head h_kv, from the loaded entries (past k_end: -1, zeros).
  template <class T>
  __device__ __forceinline__ void rows(Rows& out, const Params<T>& p, int h_kv, int key0, int k_end) const {
    const int r0 = Rows::copier() / Rows::kChunksPerRow;
#pragma unroll
    for (int it = 0; it < Rows::kPasses; ++it) {
      const int key = key0 + r0 + it * Rows::kRowsPerPass;
      out.offset[it] = key < k_end ? paged_offset<D>(p, page[it], h_kv, key) : -1;
    }
  }
};

/// Where a paged block's first tile's table entries stop: the split's end within the batch's
/// longest sequence (p.Nk, which every block-table row covers: decode_paged checks; no
/// sequence is longer: check_paged), not within this sequence's (its seq_lens entry). Known
/// from the parameters, it lets the entries load beside the length, unconditionally, instead
/// of after it: with the length first, each block waited for two loads in a row, the length
/// and then the entries, before its first copy. A row past the sequence's end (or a split
/// past every key) loads an entry it never uses: KvPages::rows gives it no offset. Table rows
/// are read up to ⌈len_kv / page_size⌉ entries, so fill them that far (any page index).
template <class T>
__device__ __forceinline__ int first_entries_end(const Params<T>& p, int k_begin) {
  return min(p.Nk, k_begin + p.keys_per_split);
}

template <class T, int D, bool kPaged, int kRowTiles = 1, bool kLengthFirst = false>
__global__ void __launch_bounds__(kThreads) decode_mma(const Params<T> p) {
  using Tile = MmaTile<D>;
  using ft::tc::FragA;
  using ft::tc::FragB;
  using ft::tc::FragC;
  static_assert(kRowTiles >= 1 && kRowTiles <= kMaxRowTiles, "one or two m16 tiles of rows");
  constexpr int kRows = kMmaRows * kRowTiles;  // the block's rows
  let_merge_launch();
  constexpr int kKSteps = D / 16;  // k-steps of S = Q·Kᵀ
  constexpr int kOTiles = D / 8;   // n8 tiles of O
  constexpr int kSTiles = kWarpKeys / 8;
  constexpr int kTileStride = kTileKeys * Tile::kRowStride;  // elements from one stage to the next

  extern __shared__ uint4 smem_raw[];  // 16-byte aligned for cp.async and ldmatrix
  T* Qs = reinterpret_cast<T*>(smem_raw);
  T* Ks = Qs + kRows * Tile::kRowStride;
  T* Vs = Ks + kMmaStages * kTileStride;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = blockIdx.x * kRows;
  const int split = blockIdx.y;
  const int head = blockIdx.z;  // b·H_kv + h_kv
  const int rows = min(kRows, p.rows - row0);
  const int batch = head / p.heads_kv, h_kv = head % p.heads_kv;
  // The block's rows are consecutive rows of Q ([B·H_q·N_q, d]): the group's query heads
  // one after the other, each its N_q rows.
  const int64_t first_row = (int64_t(batch) * p.heads_q + int64_t(h_kv) * p.group) * p.Nq + row0;
  const int Nk = kPaged ? p.seq_lens[batch] : p.Nk;  // this sequence's keys
  const int causal_offset = kPaged ? Nk - p.Nq : p.causal_offset;
  const int k_begin = split * p.keys_per_split;  // a split past the keys: no tiles
  const int k_end = min(Nk, k_begin + p.keys_per_split);
  const int num_tiles = k_end > k_begin ? (k_end - k_begin + kTileKeys - 1) / kTileKeys : 0;

  KvPages<D> pages;  // paged: the next tile's table entries, in flight while a tile is computed
  if constexpr (kPaged) {  // the first tile's beside the length (FT_CH11_LENGTH_FIRST: after it)
    if constexpr (kLengthFirst) {
      if (num_tiles > 0) pages.load(p, batch, k_begin, k_end);
    } else {
      pages.load(p, batch, k_begin, first_entries_end(p, k_begin));  // no branch: issued at once
    }
  }
  auto load_tile = [&](int j) {  // block tile j into stage j % kMmaStages; keys past k_end: zeros
    const int stage = j % kMmaStages, key0 = k_begin + j * kTileKeys;
    KvRows<D> kv_rows;
    if constexpr (kPaged) {
      pages.rows(kv_rows, p, h_kv, key0, k_end);
      if (j + 1 < num_tiles) pages.load(p, batch, key0 + kTileKeys, k_end);  // used by tile j + 1
    } else {
      kv_rows.find(p, batch, h_kv, key0, k_end);
    }
    kv_rows.template copy<Tile>(Ks + stage * kTileStride, p.K);
    kv_rows.template copy<Tile>(Vs + stage * kTileStride, p.V);
  };
  // Q's rows (past the block's: zeros) and tile 0 in one group.
  ft::tc::copy_tile_async<Tile, kRows, kThreads>(Qs, p.Q + (first_row - row0) * D, row0, p.rows,
                                                 ft::ContiguousRows{});
  if (num_tiles > 0) load_tile(0);
  ft::tc::cp_async_commit();

  // This lane's two rows of each m16 tile: g and g + 8 (g = lane / 4), as the accumulators
  // hold them; their query rows, for the causal mask.
  const int g = ft::tc::lane_group(lane);
  int q_row[kRowTiles][2];
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt)
#pragma unroll
    for (int h = 0; h < 2; ++h) q_row[rt][h] = int((row0 + rt * kMmaRows + g + 8 * h) % p.Nq);

  // One row tile: Q's fragments stay in registers. Two: O's second tile takes those
  // registers, and Q's fragments are read again from shared memory each tile (ldmatrix,
  // kKSteps·kRowTiles a warp a tile: 16 at d = 128, beside K's and V's 32).
  FragA q_frag[kRowTiles == 1 ? kKSteps : 1];
  FragC o[kRowTiles][kOTiles] = {};
  ft::OnlineSoftmax row[kRowTiles][2];
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt) row[rt][0] = row[rt][1] = ft::online_softmax_empty();

  for (int j = 0; j < num_tiles; ++j) {
    if (j + 1 < num_tiles) {  // tile j+1 flies while tile j is computed
      load_tile(j + 1);
      ft::tc::cp_async_commit();
      ft::tc::cp_async_wait<1>();
    } else {
      ft::tc::cp_async_wait<0>();
    }
    __syncthreads();  // tile j (and Q, the first time) is in shared memory for every warp
    if constexpr (kRowTiles == 1) {
      if (j == 0) {
#pragma unroll
        for (int ks = 0; ks < kKSteps; ++ks) ft::tc::load_a<Tile>(q_frag[ks], Qs, 0, ks * 16);
      }
    }
    const T* Kw = Ks + (j % kMmaStages) * kTileStride + warp * kWarpKeys * Tile::kRowStride;
    const T* Vw = Vs + (j % kMmaStages) * kTileStride + warp * kWarpKeys * Tile::kRowStride;
    const int key0 = k_begin + j * kTileKeys + warp * kWarpKeys;  // this warp's first key

    // S = Q·Kᵀ: 16 rows × 32 keys a row tile, each K fragment used by every row tile.
    FragC s[kRowTiles][kSTiles] = {};
#pragma unroll
    for (int ks = 0; ks < kKSteps; ++ks) {
      FragA qa[kRowTiles];
      if constexpr (kRowTiles == 1) {
        qa[0] = q_frag[ks];
      } else {
#pragma unroll
        for (int rt = 0; rt < kRowTiles; ++rt) ft::tc::load_a<Tile>(qa[rt], Qs, rt * kMmaRows, ks * 16);
      }
#pragma unroll
      for (int nt = 0; nt < kSTiles; nt += 2) {
        FragB kb[2];
        ft::tc::load_b_x4<Tile>(kb, Kw, nt * 8, ks * 16);
#pragma unroll
        for (int rt = 0; rt < kRowTiles; ++rt) {
          ft::tc::mma_m16n8k16<T>(s[rt][nt], qa[rt], kb[0]);
          ft::tc::mma_m16n8k16<T>(s[rt][nt + 1], qa[rt], kb[1]);
        }
      }
    }
#pragma unroll
    for (int rt = 0; rt < kRowTiles; ++rt) {
      // Keys past the split and (causal) after a row's query: score −∞, weight 0.
#pragma unroll
      for (int nt = 0; nt < kSTiles; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int key = key0 + nt * 8 + ft::tc::mma_c_coord(lane, i).col;
          if (key >= k_end || (p.causal && key > q_row[rt][i / 2] + causal_offset)) s[rt][nt].c[i] = -INFINITY;
        }
      // The online softmax on the fragments (chapter 07): half h of each accumulator is row
      // g + 8h; the max over the quad, the scale applied once.
      float alpha[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float tile_max = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < kSTiles; ++nt)
          tile_max = fmaxf(tile_max, fmaxf(s[rt][nt].c[2 * h], s[rt][nt].c[2 * h + 1]));
        alpha[h] = ft::online_rescale(row[rt][h], ft::quad_max(tile_max) * p.scale_log2);
      }
#pragma unroll
      for (int ot = 0; ot < kOTiles; ++ot)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[rt][ot].c[e] *= alpha[e / 2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float base = ft::online_exp_base(row[rt][h].m);
        float sum = 0.f;  // this lane's share of the row's l; the quad adds them at the end
#pragma unroll
        for (int nt = 0; nt < kSTiles; ++nt)
#pragma unroll
          for (int e = 2 * h; e < 2 * h + 2; ++e) {
            s[rt][nt].c[e] = ft::exp2_ftz(fmaf(s[rt][nt].c[e], p.scale_log2, -base));
            sum += s[rt][nt].c[e];
          }
        row[rt][h].l += sum;
      }
    }
    // O += P·V: P's A fragment for 16 keys is two of S's accumulator tiles, in place; each V
    // fragment used by every row tile.
#pragma unroll
    for (int kk = 0; kk < kSTiles / 2; ++kk) {
      FragA pa[kRowTiles];
#pragma unroll
      for (int rt = 0; rt < kRowTiles; ++rt) pa[rt] = ft::tc::a_from_accumulators<T>(s[rt][2 * kk], s[rt][2 * kk + 1]);
#pragma unroll
      for (int ot = 0; ot < kOTiles; ot += 2) {
        FragB vb[2];
        ft::tc::load_b_trans_x4<Tile>(vb, Vw, kk * 16, ot * 8);
#pragma unroll
        for (int rt = 0; rt < kRowTiles; ++rt) {
          ft::tc::mma_m16n8k16<T>(o[rt][ot], pa[rt], vb[0]);
          ft::tc::mma_m16n8k16<T>(o[rt][ot + 1], pa[rt], vb[1]);
        }
      }
    }
    __syncthreads();  // every warp is done with this stage before it is refilled
  }
  if (num_tiles == 0) ft::tc::cp_async_wait<0>(), __syncthreads();  // Q landed, unused

  // The warps' partial results, in the space the K/V tiles took: maxima and sums (the quad's
  // sum first), unnormalized O. A warp's m is in base-2 units of the scaled scores, as
  // decode_split's.
  float* scratch = reinterpret_cast<float*>(Ks);
  auto& ms = *reinterpret_cast<float(*)[kWarps][kRows]>(scratch);
  auto& ls = *reinterpret_cast<float(*)[kWarps][kRows]>(scratch + kWarps * kRows);
  auto& accs = *reinterpret_cast<float(*)[kWarps][kRows][D]>(scratch + 2 * kWarps * kRows);
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float l = ft::quad_sum(row[rt][h].l);
      const int r = rt * kMmaRows + g + 8 * h;
      if (ft::tc::lane_in_group(lane) == 0) {
        ms[warp][r] = row[rt][h].m;
        ls[warp][r] = l;
      }
#pragma unroll
      for (int ot = 0; ot < kOTiles; ++ot) {
        const int col = ot * 8 + 2 * ft::tc::lane_in_group(lane);
        accs[warp][r][col] = o[rt][ot].c[2 * h];
        accs[warp][r][col + 1] = o[rt][ot].c[2 * h + 1];
      }
    }
  __syncthreads();
  write_block_rows<T, D, kRows>(p, ms, ls, accs, rows, first_row, split);
}

}  // namespace ch11
