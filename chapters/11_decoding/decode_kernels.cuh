/// @file decode_kernels.cuh
/// @brief Chapter 11's kernels: decoding, a few query rows a sequence against a long K/V
/// cache, on the CUDA cores (the arithmetic is a few FLOPs a byte: the bytes set the time).
///
/// decode_split: one block (4 warps) a (split of the keys, sequence, key/value head or query
/// head, chunk of rows). Its knobs, one a step of the chapter: Its rows are the query rows that read one key/value head:
///   grouped (kGrouped): the group's query heads × the sequence's query rows, so that each
///                       K/V byte is read once for all of them;
///   not:                one query head's rows, its key/value head read once a query head.
///   kBatchedV:          each tile's 32 V rows loaded together (8 or 4 bytes a lane) before
///                       any is used: one round trip to memory a tile, where loading a row
///                       at a time, each used at once, waited for 32;
/// Per 32-key tile, lane l takes key t0 + l: its score against every row (K's row read by
/// the lane, 16 bytes at a time; Q in shared memory, pre-scaled by scale·log2 e, read as a
/// broadcast), the tile's online softmax across the warp (chapter 03), then P·V with lane l
/// owning d/32 output columns (each key's P broadcast by a shuffle, its V row read by the
/// warp, coalesced). The four warps' partial results merge in shared memory; a block with
/// the whole key range (one split) writes O and the lse, else its split's normalized O and
/// lse go to the workspace and decode_merge combines the splits by their lse
/// (reference/split_kv.hpp's formula).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cuda_core/exp2.cuh"
#include "cuda_core/online_softmax.cuh"  // ft::kLog2e, ft::kLn2
#include "cuda_core/reduce.cuh"          // ft::warp_max, ft::warp_sum
#include "sm80/pack.cuh"                 // ft::tc::unpack2, to_float, from_float
#include "sm90/dependent_launch.cuh"     // ft::sm90::launch_dependents, wait_for_prerequisites

namespace ch11 {

constexpr int kWarps = 4;                       ///< warps a block: 4 tiles of 32 keys in flight
constexpr int kThreads = kWarps * 32;
constexpr int kMaxQueryRows = 16;               ///< query rows a sequence (speculative decoding's few)
/// At most this many splits of the keys: the merge reads splits × (d + 1) floats a query
/// row, and the workspace holds that many a row.
constexpr int kMaxSplits = 128;
/// Threads of a merge block. Each owns four columns of a query row (one 16-byte load a split)
/// and one "slot" of its splits (s ≡ slot modulo the slots); a row has d/4 threads a slot.
constexpr int kMergeThreads = 256;
/// Splits a merge thread loads before it uses any: 16 · 16 bytes in flight a thread, so that
/// 8 slots (d = 128, a block a row) cover kMaxSplits in one wait on L2.
constexpr int kMergeBatch = 16;
/// The most query rows a merge block takes (its kRows): few splits leave slots idle, so a
/// block then merges several rows, a warp or more each.
constexpr int kMaxMergeRows = 8;

/// The merge is launched while the decode kernel still runs (sm_90 on, unless FT_CH11_PDL=0:
/// Hopper's programmatic dependent launch, sm90/dependent_launch.cuh), so that its launch
/// overlaps the decode's last blocks instead of following them. Each decode block says at its start that
/// the merge may launch; the merge's threads wait, before they read a partial result, until
/// the decode grid has finished and its writes are visible. Launched plainly, both do nothing.
__device__ __forceinline__ void let_merge_launch() { ft::sm90::launch_dependents(); }
__device__ __forceinline__ void wait_for_decode() { ft::sm90::wait_for_prerequisites(); }

template <class T>
struct Params {
  const T* Q;        ///< [B, H_q, N_q, d]
  const T* K;        ///< [B, H_kv, N_k, d]
  const T* V;
  T* O;              ///< [B, H_q, N_q, d]
  float* lse;        ///< [B, H_q, N_q]
  float* o_part;     ///< [splits, B·H_q·N_q, d]: each split's normalized O (splits > 1)
  float* lse_part;   ///< [splits, B·H_q·N_q]
  int Nq, Nk, heads_q, heads_kv, group;
  int causal_offset;  ///< key j visible to query i iff j <= i + causal_offset (bottom-right: N_k − N_q)
  bool causal;
  float scale_log2;   ///< softmax scale · log2(e)
  int splits;
  int keys_per_split;
  int rows;           ///< query rows a block's (head, sequence) has: group·N_q, or N_q
  int64_t total_rows; ///< B·H_q·N_q: the workspace's row count
  int merge_slices = 1;  ///< the grid's merge (decode_grid_merge.cuh): slices of a row's columns, 1, 2 or 4
  // Paged (decode_mma's kPaged): K and V are pools [page][H_kv][page_size][d] (core/
  // paged_kv.hpp); sequence b's token t lies in page block_table[b·pages_per_seq + t /
  // page_size]; sequence b holds seq_lens[b] tokens (N_k is the longest), and its causal
  // offset is seq_lens[b] − N_q (the decode position).
  const int32_t* block_table = nullptr;
  const int32_t* seq_lens = nullptr;
  int page_size = 0;   ///< a power of two (check_paged), so that t / page_size is a shift
  int page_shift = 0;  ///< log2(page_size)
  int pages_per_seq = 0;
  // Not paged: K's and V's strides in elements (the same for both): contiguous [B, H_kv,
  // N_k, d], or views of a longer cache ([B, H_kv, capacity, d] filled to N_k rows).
  int64_t kv_batch_stride = 0;
  int64_t kv_head_stride = 0;
};

/// The block-table entry that holds token `pos` of sequence b (a page of the pool). A shift,
/// not a division: an integer division is a sequence of some twenty instructions on the GPU
/// (no divider; a float reciprocal and corrections), and decode_mma finds 16 rows' pages a
/// thread each tile; with `/` and `%` by a page size known only at run time the paged kernel
/// ran at 0.25–0.40× its contiguous cache at B >= 16 (the chapter's case study).
template <class T>
__device__ __forceinline__ int page_of(const Params<T>& p, int b, int pos) {
  return p.block_table[int64_t(b) * p.pages_per_seq + (pos >> p.page_shift)];
}

/// The element offset of token `pos`'s row of key/value head h_kv in the pool, given its page:
/// the row counted in 32 bits, then widened once. The pool holds fewer than 2^31 rows
/// (check_pool_rows: 256 GB at d = 64 in bf16), so the row fits; counted in 64 bits from the
/// start, each row's offset was a dozen instructions and a branch, sixteen rows a thread a
/// tile (the case study's "The rows counted in 32 bits").
template <int D, class T>
__device__ __forceinline__ int64_t paged_offset(const Params<T>& p, int page, int h_kv, int pos) {
  const int row = ((page * p.heads_kv + h_kv) << p.page_shift) | (pos & (p.page_size - 1));
  return int64_t(row) * D;
}

/// The element offset at which K's (and V's: the same layout) row `pos` of key/value head
/// h_kv of sequence b starts in the contiguous cache or a view of a longer one.
template <int D, class T>
__device__ __forceinline__ int64_t kv_offset(const Params<T>& p, int b, int h_kv, int pos) {
  return int64_t(b) * p.kv_batch_stride + int64_t(h_kv) * p.kv_head_stride + int64_t(pos) * D;
}

/// A lane's columns of a V row, as loaded: 4 elements (8 bytes) at d = 128, 2 (4 bytes) at
/// d = 64, kept packed until used (a tile's 32 rows then take 64 or 32 registers).
template <int kCols>
using Packed = std::conditional_t<kCols == 4, uint2, uint32_t>;

template <class T, int kCols>
__device__ __forceinline__ void unpack_cols(const Packed<kCols>& raw, float (&out)[kCols]) {
  static_assert(kCols == 2 || kCols == 4, "d = 64 or 128");
  if constexpr (kCols == 4) {
    const float2 a = ft::tc::unpack2<T>(raw.x), b = ft::tc::unpack2<T>(raw.y);
    out[0] = a.x, out[1] = a.y, out[2] = b.x, out[3] = b.y;
  } else {
    const float2 a = ft::tc::unpack2<T>(raw);
    out[0] = a.x, out[1] = a.y;
  }
}

using ft::tc::from_float;  // sm80/pack.cuh
using ft::tc::to_float;

/// 8 elements of T from 16 bytes (one load), as floats.
template <class T>
__device__ __forceinline__ void load8(const T* src, float (&out)[8]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(src);
  const float2 a = ft::tc::unpack2<T>(raw.x), b = ft::tc::unpack2<T>(raw.y);
  const float2 c = ft::tc::unpack2<T>(raw.z), e = ft::tc::unpack2<T>(raw.w);
  out[0] = a.x, out[1] = a.y, out[2] = b.x, out[3] = b.y;
  out[4] = c.x, out[5] = c.y, out[6] = e.x, out[7] = e.y;
}

/// The block's rows from its warps' partial results (each warp over its own keys: maxima ms
/// in base-2 units, sums ls, unnormalized outputs accs), merged by their maxima: O and the
/// lse when the block had the whole key range (one split), else its split's normalized O and
/// lse into the workspace for decode_merge. The block's row r is row first_row + r of O and
/// the lse ([B·H_q·N_q] rows: b·H_q·N_q + h·N_q + i).
template <class T, int D, int kRows>
__device__ __forceinline__ void write_block_rows(const Params<T>& p, const float (&ms)[kWarps][kRows],
                                                 const float (&ls)[kWarps][kRows],
                                                 const float (&accs)[kWarps][kRows][D], int rows, int64_t first_row,
                                                 int split) {
  for (int i = threadIdx.x; i < rows * D; i += kThreads) {
    const int r = i / D, c = i % D;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, ms[w][r]);
    float sum = 0.f, o = 0.f;
    if (mx != -INFINITY) {
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const float f = ft::exp2_ftz(ms[w][r] - mx);  // a warp that saw no key: 0
        sum += ls[w][r] * f;
        o += accs[w][r][c] * f;
      }
    }
    const float out = sum > 0.f ? o / sum : 0.f;
    const float lse = sum > 0.f ? (mx + log2f(sum)) * ft::kLn2 : -INFINITY;
    const int64_t row = first_row + r;
    if (p.splits == 1) {
      p.O[row * D + c] = from_float<T>(out);
      if (c == 0) p.lse[row] = lse;
    } else {
      p.o_part[(int64_t(split) * p.total_rows + row) * D + c] = out;
      if (c == 0) p.lse_part[int64_t(split) * p.total_rows + row] = lse;
    }
  }
}

/// kRows: the block's rows, a compile-time bound (1, 2, 4, 8 or 16: its partial results, 4 ·
/// kRows · d floats, fit the 48 KB of static shared memory); the block handles rows
/// [blockIdx.z·kRows, ...) of its head's p.rows (a group of 32 query heads: two blocks).
/// (Launch bounds with one block a SM at least: without the second number ptxas held the
/// one-row instances to 32 registers on sm_90 and spilled.)
template <class T, int D, int kRows, bool kGrouped, bool kBatchedV = false>
__global__ void __launch_bounds__(kThreads, 1) decode_split(const Params<T> p) {
  constexpr int kCols = D / 32;  // output columns a lane owns in P·V
  static_assert(D == 64 || D == 128, "d = 64 or 128: whole 16-byte K chunks, d/32 columns a lane");
  static_assert(kRows <= 16, "the warps' partial results in static shared memory");
  __shared__ float qs[kRows][D];             // Q, pre-scaled by scale·log2 e
  __shared__ float ms[kWarps][kRows], ls[kWarps][kRows];
  __shared__ float accs[kWarps][kRows][D];
  let_merge_launch();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int split = blockIdx.x;
  const int head = blockIdx.y;  // b·H_kv + h_kv (grouped), or b·H_q + h
  const int row0 = blockIdx.z * kRows;
  const int rows = min(kRows, p.rows - row0);
  const int batch = kGrouped ? head / p.heads_kv : head / p.heads_q;
  const int kv_head = kGrouped ? head : batch * p.heads_kv + (head % p.heads_q) / p.group;
  const int h_kv = kv_head % p.heads_kv;  // within the sequence
  const int Nk = p.Nk, causal_offset = p.causal_offset;
  // Row r of the block: query head and query row.
  auto q_head_of = [&](int r) {
    const int rr = row0 + r;
    return kGrouped ? batch * p.heads_q + (head % p.heads_kv) * p.group + rr / p.Nq : head;
  };
  auto q_row_of = [&](int r) { return (row0 + r) % p.Nq; };

  for (int i = threadIdx.x; i < kRows * D; i += kThreads) {
    const int r = i / D, c = i % D;
    qs[r][c] = r < rows ? to_float(p.Q[(int64_t(q_head_of(r)) * p.Nq + q_row_of(r)) * D + c]) * p.scale_log2 : 0.f;
  }
  __syncthreads();

  const int k_begin = split * p.keys_per_split;  // a split past a short sequence's end: no keys
  const int k_end = min(Nk, k_begin + p.keys_per_split);

  float m[kRows], l[kRows], acc[kRows][kCols];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.f;
#pragma unroll
    for (int c = 0; c < kCols; ++c) acc[r][c] = 0.f;
  }

  for (int t0 = k_begin + warp * 32; t0 < k_end; t0 += kWarps * 32) {
    const int key = t0 + lane;
    // This lane's key's row (the warp's V loads below take each key's offset from its lane
    // by a shuffle).
    const int64_t row = key < k_end ? kv_offset<D>(p, batch, h_kv, key) : 0;
    float s[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) s[r] = 0.f;
    if (key < k_end) {
#pragma unroll
      for (int c0 = 0; c0 < D; c0 += 8) {
        float k8[8];
        load8(p.K + row + c0, k8);
#pragma unroll
        for (int r = 0; r < kRows; ++r)
#pragma unroll
          for (int e = 0; e < 8; ++e) s[r] = fmaf(qs[r][c0 + e], k8[e], s[r]);
      }
    }
    // The tile's online softmax, row by row, across the warp's 32 keys.
    float prob[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const bool visible = key < k_end && r < rows && (!p.causal || key <= q_row_of(r) + causal_offset);
      const float sc = visible ? s[r] : -INFINITY;
      const float m_new = fmaxf(m[r], ft::warp_max(sc));
      const float alpha = m_new == -INFINITY ? 1.f : ft::exp2_ftz(m[r] - m_new);
      prob[r] = visible ? ft::exp2_ftz(sc - m_new) : 0.f;
      l[r] = l[r] * alpha + ft::warp_sum(prob[r]);
      m[r] = m_new;
#pragma unroll
      for (int c = 0; c < kCols; ++c) acc[r][c] *= alpha;
    }
    // P·V: key t0 + j's V row read by the warp (lane l: columns l·kCols on), its P broadcast.
    const int tile_keys = min(32, k_end - t0);
    if constexpr (kBatchedV) {
      // All 32 rows' loads first (a key past the split reads nothing and weighs 0), then the
      // products: the loads are in flight together.
      Packed<kCols> raw[32];
#pragma unroll
      for (int j = 0; j < 32; ++j) {
        const int64_t row_j = __shfl_sync(0xffffffffu, row, j);
        raw[j] = Packed<kCols>{};  // a key past the split: zeros, finite, and its P is 0
        if (j < tile_keys) raw[j] = *reinterpret_cast<const Packed<kCols>*>(p.V + row_j + lane * kCols);
      }
#pragma unroll
      for (int j = 0; j < 32; ++j) {
        float v[kCols];
        unpack_cols<T, kCols>(raw[j], v);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          const float pj = __shfl_sync(0xffffffffu, prob[r], j);
#pragma unroll
          for (int c = 0; c < kCols; ++c) acc[r][c] = fmaf(pj, v[c], acc[r][c]);
        }
      }
    } else {
      for (int j = 0; j < tile_keys; ++j) {
        float v[kCols];
        const T* vrow = p.V + kv_offset<D>(p, batch, h_kv, t0 + j) + lane * kCols;
#pragma unroll
        for (int c = 0; c < kCols; ++c) v[c] = to_float(vrow[c]);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          const float pj = __shfl_sync(0xffffffffu, prob[r], j);
#pragma unroll
          for (int c = 0; c < kCols; ++c) acc[r][c] = fmaf(pj, v[c], acc[r][c]);
        }
      }
    }
  }

  // The four warps' partial results, merged by their maxima.
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    if (lane == 0) {
      ms[warp][r] = m[r];
      ls[warp][r] = l[r];
    }
#pragma unroll
    for (int c = 0; c < kCols; ++c) accs[warp][r][lane * kCols + c] = acc[r][c];
  }
  __syncthreads();
  // The block's rows are consecutive rows of Q and O: its first is its first query head's
  // row q_row_of(0).
  write_block_rows<T, D, kRows>(p, ms, ls, accs, rows, int64_t(q_head_of(0)) * p.Nq + q_row_of(0), split);
}

/// What a merge of kRows query rows by kBlockThreads threads keeps in shared memory: each
/// slot's Σ exp(lse − m)·O (four columns a thread), its maximum m and its sum l. A row takes
/// kBlockThreads / kRows threads (a warp or more), kCols/4 of them a slot; kCols is d, or the
/// slice of a row's columns that one block merges (merge_in_grid).
template <int kCols, int kRows, int kBlockThreads>
struct MergeScratch {
  static constexpr int kGroups = kCols / 4;                    // threads across a row, four columns each
  static constexpr int kRowThreads = kBlockThreads / kRows;    // a warp or more a row
  static constexpr int kSlots = kRowThreads / kGroups;         // splits of a row weighed side by side
  static_assert(kRowThreads % 32 == 0 && kRowThreads % kGroups == 0 && kSlots >= 1, "whole warps, whole slots a row");
  float4 acc[kRows][kSlots][kGroups];
  float m[kRows][kSlots], l[kRows][kSlots];
};

/// O and lse of the kRows query rows from `first` on (those below `rows`) from their splits'
/// (normalized O, lse), chapter 03's merge twice over. Each thread walks its slot's splits
/// kMergeBatch at a time, every load of a batch issued before any is used, keeping a running
/// maximum m of their lse, the weights' sum l = Σ exp(lse − m) and the weighted columns
/// Σ exp(lse − m)·O; the row's slots then meet in `scratch`, rescaled by their maxima.
/// merge_rows chooses kRows so that a thread's splits fit one batch: the rescale between
/// batches serves other shapes only. (A warp a row, walking the splits eight at a time after
/// a pass for the maximum, waited on L2 ten times at 66 splits, B = 1 with 32 heads on one;
/// the chapter's case study measures the two.) Every thread of the block calls it; a caller
/// that reuses `scratch` waits at a barrier first. With kCols < D the block merges only the
/// columns col0 to col0 + kCols of its rows, and the block with col0 = 0 writes their lse.
template <class T, int D, int kRows, int kBlockThreads, int kCols = D>
__device__ __forceinline__ void merge_block_rows(const float* o_part, const float* lse_part, T* O, float* lse,
                                                 int64_t rows, int splits, int64_t first,
                                                 MergeScratch<kCols, kRows, kBlockThreads>& scratch, int col0 = 0) {
  static_assert(D % kCols == 0, "a row's columns in whole slices");
  using Scratch = MergeScratch<kCols, kRows, kBlockThreads>;
  constexpr int kGroups = Scratch::kGroups, kRowThreads = Scratch::kRowThreads, kSlots = Scratch::kSlots;
  const int r = threadIdx.x / kRowThreads, t = threadIdx.x % kRowThreads;
  const int group = t % kGroups, slot = t / kGroups;
  const int64_t row = first + r;
  const bool live = row < rows;  // a thread past the last row still meets the others below

  float m = -INFINITY, l = 0.f;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int first_split = slot; live && first_split < splits; first_split += kSlots * kMergeBatch) {
    float4 part[kMergeBatch];
    float x[kMergeBatch];  // the splits' lse; −∞ for an empty split or none
#pragma unroll
    for (int u = 0; u < kMergeBatch; ++u) {
      const int s = first_split + u * kSlots;
      const int64_t at = int64_t(s) * rows + row;
      part[u] = s < splits ? *reinterpret_cast<const float4*>(o_part + at * D + col0 + group * 4)
                           : make_float4(0.f, 0.f, 0.f, 0.f);
      x[u] = s < splits ? lse_part[at] : -INFINITY;
    }
    float m_new = m;
#pragma unroll
    for (int u = 0; u < kMergeBatch; ++u) m_new = fmaxf(m_new, x[u]);
    if (m_new == -INFINITY) continue;  // every split so far empty: nothing to weigh yet
    const float rescale = __expf(m - m_new);  // 0 when m was −∞
    acc.x *= rescale, acc.y *= rescale, acc.z *= rescale, acc.w *= rescale, l *= rescale;
#pragma unroll
    for (int u = 0; u < kMergeBatch; ++u) {
      const float w = __expf(x[u] - m_new);  // an empty split: 0
      l += w;
      acc.x += w * part[u].x, acc.y += w * part[u].y, acc.z += w * part[u].z, acc.w += w * part[u].w;
    }
    m = m_new;
  }
  scratch.acc[r][slot][group] = acc;
  if (group == 0) scratch.m[r][slot] = m, scratch.l[r][slot] = l;
  __syncthreads();
  if (slot != 0 || !live) return;

  float mx = -INFINITY;
#pragma unroll
  for (int k = 0; k < kSlots; ++k) mx = fmaxf(mx, scratch.m[r][k]);
  float sum = 0.f;
  float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
  if (mx != -INFINITY) {
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      const float w = __expf(scratch.m[r][k] - mx);  // a slot that saw no split: 0
      const float4 a = scratch.acc[r][k][group];
      sum += w * scratch.l[r][k];
      o.x += w * a.x, o.y += w * a.y, o.z += w * a.z, o.w += w * a.w;
    }
  }
  const float inv = sum > 0.f ? 1.f / sum : 0.f;  // sum is 0 only when every split was empty
  T* out = O + row * D + col0 + group * 4;
  out[0] = from_float<T>(o.x * inv), out[1] = from_float<T>(o.y * inv);
  out[2] = from_float<T>(o.z * inv), out[3] = from_float<T>(o.w * inv);
  if (group == 0 && col0 == 0) lse[row] = sum > 0.f ? mx + __logf(sum) : -INFINITY;
}

/// The merge as a kernel of its own, behind the decode grid: a block of kMergeThreads
/// threads merges kRows query rows (rows blockIdx.x·kRows onwards).
template <class T, int D, int kRows>
__global__ void __launch_bounds__(kMergeThreads) decode_merge(const float* o_part, const float* lse_part, T* O,
                                                              float* lse, int64_t rows, int splits) {
  __shared__ MergeScratch<D, kRows, kMergeThreads> scratch;
  wait_for_decode();  // launched early (FT_CH11_PDL): the splits' results must be written first
  merge_block_rows<T, D, kRows, kMergeThreads>(o_part, lse_part, O, lse, rows, splits, int64_t(blockIdx.x) * kRows,
                                               scratch);
}

}  // namespace ch11
