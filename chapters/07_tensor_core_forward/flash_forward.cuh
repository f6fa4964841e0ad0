/// @file flash_forward.cuh
/// @brief Chapter 07's kernel: FlashAttention-2's fused forward on the tensor cores.
///
/// One block per query tile of Br rows of one head; warp w owns Br/W of those rows. Per K/V
/// tile of Bc keys, each warp computes its S = Q·Kᵀ with mma.sync (accumulators in float32),
/// folds it into its rows' running max m and sum l (chapter 03's online softmax, on the
/// accumulator fragments), turns P = 2^(S − m) into bf16/fp16 in the registers where the
/// accumulators already are, and uses them as the A operand of O += P·V: P never touches
/// shared memory. After the last tile, O is divided by l and written once, with the lse.
/// The traits (forward_traits.cuh) choose the layout of shared memory and how tiles arrive.
#pragma once

#include <cstdint>
#include <type_traits>

#include "07_tensor_core_forward/forward_traits.cuh"
#include "cuda_core/exp2.cuh"  // ft::exp2_ftz: one MUFU.EX2 per score
#include "cuda_core/online_softmax.cuh"
#include "cuda_core/reduce.cuh"
#include "core/strides.hpp"
#include "sm80/cp_async.cuh"
#include "sm80/ldmatrix.cuh"
#include "sm80/mma.cuh"
#include "sm80/pack.cuh"
#include "sm80/tile_copy.cuh"

namespace ch07 {

using ft::tc::FragA;
using ft::tc::FragB;
using ft::tc::FragC;

/// The kernel's arguments: one head is N·d elements of each tensor, heads back to back
/// (unless the traits read views: then the ft::ViewArgs beside them say where each row is).
template <class T>
struct Params {
  const T* Q;
  const T* K;
  const T* V;
  T* O;
  float* lse;       ///< natural-log log-sum-exp per query row, [B, H, N] (always contiguous)
  int N;            ///< sequence length (with KeyValue traits: the keys')
  int num_q_tiles;  ///< ceil(N / Br) (KeyValue: ceil(N_q / Br))
  bool causal;
  float scale_log2;  ///< softmax scale · log2(e): scores in base-2 units, every exp an exp2
};

/// What the KeyValue traits (forward_traits.cuh) read beside Params: two lengths and grouped
/// heads. A kernel argument of its own, as ft::ViewArgs is, so that Params and the
/// self-attention kernels stay as they were measured.
struct KeyValueArgs {
  int Nq = 0;             ///< queries per head (Params::N is the keys')
  int group = 1;          ///< query heads per key/value head: query head bh reads K/V head bh / group
  int causal_offset = 0;  ///< causal: key j visible to query i iff j <= i + causal_offset
};

/// A row's max and sum over the 4 lanes that hold it (cuda_core/reduce.cuh).
using ft::quad_max;
using ft::quad_sum;

/// K and V tile number `j` into buffer `buf`, by the traits' copy method (rows ldk and ldv
/// elements apart).
template <class Tr, class T, class Ld>
__device__ __forceinline__ void load_kv(T* Ks, T* Vs, const T* K, const T* V, Ld ldk, Ld ldv,
                                        int j, int N) {
  if constexpr (Tr::kCopy == Copy::kAsync) {
    ft::tc::copy_tile_async<typename Tr::Tile, Tr::Bc, Tr::kThreads>(Ks, K, j * Tr::Bc, N, ldk);
    ft::tc::copy_tile_async<typename Tr::Tile, Tr::Bc, Tr::kThreads>(Vs, V, j * Tr::Bc, N, ldv);
    ft::tc::cp_async_commit();
  } else {
    ft::tc::copy_tile_sync<typename Tr::Tile, Tr::Bc, Tr::kThreads>(Ks, K, j * Tr::Bc, N, ldk);
    ft::tc::copy_tile_sync<typename Tr::Tile, Tr::Bc, Tr::kThreads>(Vs, V, j * Tr::Bc, N, ldv);
  }
}

template <class Tr>
__global__ void __launch_bounds__(Tr::kThreads) flash_forward_tc(const Params<typename Tr::T> p,
                                                                  const ft::ViewArgs v,
                                                                  const KeyValueArgs kv) {
  using T = typename Tr::T;
  using Tile = typename Tr::Tile;
  constexpr int D = Tr::D, Br = Tr::Br, Bc = Tr::Bc, MT = Tr::kMTiles;

  extern __shared__ uint4 smem_raw[];  // uint4: 16-byte aligned for ldmatrix and cp.async
  T* Qs = reinterpret_cast<T*>(smem_raw);                  // [Br][D]
  T* Ks = Qs + Br * Tile::kRowStride;                       // [kStages][Bc][D]
  T* Vs = Ks + Tr::kStages * Bc * Tile::kRowStride;        // [kStages][Bc][D]
  constexpr int kKvStride = Bc * Tile::kRowStride;          // elements from one buffer to the next

  const int lane = ft::tc::lane_id(), warp = threadIdx.x / ft::tc::kLanes;
  // Last query tile first: under the causal mask it has the most key tiles, and starting the
  // longest blocks first keeps the last wave short (chapter 04).
  const int q0 = (p.num_q_tiles - 1 - int(blockIdx.x % p.num_q_tiles)) * Br;
  const int64_t head = blockIdx.x / p.num_q_tiles;  // b·H_q + h
  const int N = p.N;  // keys per head: what the K/V loop runs over
  // Two lengths and grouped heads (KeyValue traits): the queries per head, the key/value head
  // this query head reads (b·H_kv + h / group, which is head / group), and how far right the
  // causal diagonal sits (problem.hpp). Self-attention's kernels fold these to N, head and 0
  // at compile time, and compile to the instructions that were measured.
  constexpr bool kKV = Tr::kKeyValue;
  const int Nq = kKV ? kv.Nq : N;
  const int64_t kv_head = kKV ? int64_t(int(head) / kv.group) : head;
  const int offset = kKV ? kv.causal_offset : 0;
  // This head's rows: heads back to back (the layout contract), or where a view's strides
  // put them (strides.hpp; the contiguous lines stay as they were measured).
  constexpr bool kViews = Tr::kViews;
  const T* Q = p.Q + head * Nq * D;
  const T* K = p.K + kv_head * N * D;
  const T* V = p.V + kv_head * N * D;
  if constexpr (kViews) {
    Q = p.Q + ft::head_start(v.strides.Q, head, v.heads);
    K = p.K + ft::head_start(v.strides.K, kv_head, kKV ? v.heads_kv : v.heads);
    V = p.V + ft::head_start(v.strides.V, kv_head, kKV ? v.heads_kv : v.heads);
  }
  const auto ldk = ft::row_stride<kViews>(v.strides.K), ldv = ft::row_stride<kViews>(v.strides.V);
  const int warp_row0 = warp * Tr::kRowsPerWarp;  // this warp's first row in the tile

  // Causal: no key tile past the one that holds the last key the tile's last query sees
  // (tiles above the diagonal are skipped, not masked). Bottom-right with N_q > N_kv: a tile
  // whose queries see no key has none (kv_end ≤ 0), and writes O = 0, lse = −∞.
  const int kv_end = p.causal ? min(N, q0 + Br + offset) : N;
  const int num_kv_tiles = kKV && kv_end <= 0 ? 0 : (kv_end + Bc - 1) / Bc;

  // The Q tile (and, with cp.async, K/V tile 0 in the same group) start on their way.
  if constexpr (Tr::kCopy == Copy::kAsync) {
    ft::tc::copy_tile_async<Tile, Br, Tr::kThreads>(Qs, Q, q0, Nq, ft::row_stride<kViews>(v.strides.Q));
    if (!kKV || num_kv_tiles > 0) load_kv<Tr>(Ks, Vs, K, V, ldk, ldv, 0, N);
    else ft::tc::cp_async_commit(), ft::tc::cp_async_wait<0>();  // nothing to compute: Q lands, unused
  } else {
    ft::tc::copy_tile_sync<Tile, Br, Tr::kThreads>(Qs, Q, q0, Nq, ft::row_stride<kViews>(v.strides.Q));
  }

  FragC o[MT][Tr::kOTiles] = {};        // O, unnormalized: 16×8 float tiles
  ft::OnlineSoftmax row[MT][2];          // per 16-row tile, rows g and g+8 of this lane
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) row[mt][0] = row[mt][1] = ft::online_softmax_empty();
  FragA q_frag[Tr::kQInRegisters ? MT : 1][Tr::kQInRegisters ? Tr::kKSteps : 1];

  // One K/V tile: wait for it, S = Q·Kᵀ, the online softmax, O += P·V. kMasked (a
  // compile-time flag) adds the mask; only the tiles that cross the diagonal (causal) or
  // run past N need it, so the loop over the others carries no mask code at all.
  auto kv_step = [&](int j, auto masked_tag) {
    constexpr bool kMasked = decltype(masked_tag)::value;
    const int buf = Tr::kStages == 2 ? j % 2 : 0;
    T* Kj = Ks + buf * kKvStride;
    T* Vj = Vs + buf * kKvStride;
    if constexpr (Tr::kCopy == Copy::kAsync) {
      if (j + 1 < num_kv_tiles) {  // tile j+1 flies while tile j is computed
        load_kv<Tr>(Ks + (1 - buf) * kKvStride, Vs + (1 - buf) * kKvStride, K, V, ldk, ldv, j + 1, N);
        ft::tc::cp_async_wait<1>();  // everything but the newest group (tile j+1) has landed
      } else {
        ft::tc::cp_async_wait<0>();
      }
    } else {
      load_kv<Tr>(Kj, Vj, K, V, ldk, ldv, j, N);
    }
    __syncthreads();  // tile j (and Q, the first time) is in shared memory for every warp

    if constexpr (Tr::kQInRegisters) {
      if (j == 0) {  // Q has arrived with tile 0: its fragments go to registers for good
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int ks = 0; ks < Tr::kKSteps; ++ks)
            ft::tc::load_a<Tile>(q_frag[mt][ks], Qs, warp_row0 + mt * 16, ks * 16);
      }
    }

    // S = Q·Kᵀ: for each k-step of 16 columns of d, two 8-key B fragments per ldmatrix.x4,
    // each used by every 16-row tile of this warp.
    FragC s[MT][Tr::kSTiles] = {};
#pragma unroll
    for (int ks = 0; ks < Tr::kKSteps; ++ks) {
      FragA qa[MT];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if constexpr (Tr::kQInRegisters) qa[mt] = q_frag[mt][ks];
        else ft::tc::load_a<Tile>(qa[mt], Qs, warp_row0 + mt * 16, ks * 16);
      }
#pragma unroll
      for (int nt = 0; nt < Tr::kSTiles; nt += 2) {
        FragB kb[2];
        ft::tc::load_b_x4<Tile>(kb, Kj, nt * 8, ks * 16);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          ft::tc::mma_m16n8k16<T>(s[mt][nt], qa[mt], kb[0]);
          ft::tc::mma_m16n8k16<T>(s[mt][nt + 1], qa[mt], kb[1]);
        }
      }
    }

    // In a masked tile, a key past N or (causal) after the query gets score -inf: weight
    // 2^-inf = 0.
    if constexpr (kMasked) {
      const int kv0 = j * Bc;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < Tr::kSTiles; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const ft::tc::RowCol at = ft::tc::mma_c_coord(lane, i);
            const int query = q0 + warp_row0 + mt * 16 + at.row, key = kv0 + nt * 8 + at.col;
            if (key >= N || (p.causal && key > query + offset)) s[mt][nt].c[i] = -INFINITY;
          }
    }

    // The online softmax on the fragments: half h of each accumulator (c0,c1 or c2,c3) is
    // one row; its max over the tile is a max over this lane's elements, then over the quad.
    // The max is taken on the raw scores and scaled once (the scale is positive), and each
    // weight is one FFMA and one exp2: 2^(s·scale·log2 e − m).
    float alpha[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float tile_max = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < Tr::kSTiles; ++nt)
          tile_max = fmaxf(tile_max, fmaxf(s[mt][nt].c[2 * h], s[mt][nt].c[2 * h + 1]));
        alpha[mt][h] = ft::online_rescale(row[mt][h], quad_max(tile_max) * p.scale_log2);
      }
    // O *= alpha row by row. Once the running maxima settle, most tiles raise none of them
    // (alpha = 1 everywhere); kWhenRaised asks the warp first and skips the multiplies then.
    bool rescale = true;
    if constexpr (Tr::kRescale == Rescale::kWhenRaised) {
      bool raised = false;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) raised |= alpha[mt][0] != 1.f || alpha[mt][1] != 1.f;
      rescale = __any_sync(0xffffffffu, raised);
    }
    if (rescale) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int ot = 0; ot < Tr::kOTiles; ++ot)
#pragma unroll
          for (int e = 0; e < 4; ++e) o[mt][ot].c[e] *= alpha[mt][e / 2];
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float base = ft::online_exp_base(row[mt][h].m);
        float sum = 0.f;  // this lane's share of the row's l; the quad adds them at the end
#pragma unroll
        for (int nt = 0; nt < Tr::kSTiles; ++nt)
#pragma unroll
          for (int e = 2 * h; e < 2 * h + 2; ++e) {
            s[mt][nt].c[e] = ft::exp2_ftz(fmaf(s[mt][nt].c[e], p.scale_log2, -base));
            sum += s[mt][nt].c[e];
          }
        row[mt][h].l += sum;
      }

    // O += P·V: P's A fragment for 16 keys is the two accumulator tiles of those keys,
    // converted in place (sm80/pack.cuh); V's B fragments come transposed from V's rows.
#pragma unroll
    for (int kk = 0; kk < Tr::kPvSteps; ++kk) {
      FragA pa[MT];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        pa[mt] = ft::tc::a_from_accumulators<T>(s[mt][2 * kk], s[mt][2 * kk + 1]);
#pragma unroll
      for (int ot = 0; ot < Tr::kOTiles; ot += 2) {
        FragB vb[2];
        ft::tc::load_b_trans_x4<Tile>(vb, Vj, kk * 16, ot * 8);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          ft::tc::mma_m16n8k16<T>(o[mt][ot], pa[mt], vb[0]);
          ft::tc::mma_m16n8k16<T>(o[mt][ot + 1], pa[mt], vb[1]);
        }
      }
    }
    __syncthreads();  // every warp is done with buffer `buf` before it is refilled
  };

  // Tiles wholly below the diagonal and inside N first, unmasked; then the rest (the
  // diagonal tiles under causal, the partial tile past N), masked. (A row whose first tiles
  // hide every key, bottom-right with N_q > N_kv, keeps m = −∞ until a visible key comes:
  // online_softmax.cuh makes such a row's weights 0, not NaN.) Tile j is wholly visible to
  // the tile's first query, q0, when its last key (j + 1)·Bc − 1 ≤ q0 + causal_offset.
  const int first_row_keys = kKV ? max(0, q0 + offset + 1) : q0 + 1;  // keys query q0 sees
  const int full_tiles = min(N / Bc, p.causal ? first_row_keys / Bc : num_kv_tiles);
  int j = 0;
  for (; j < min(full_tiles, num_kv_tiles); ++j) kv_step(j, std::false_type{});
  for (; j < num_kv_tiles; ++j) kv_step(j, std::true_type{});

  // The division by l, once per row, then O (two neighbouring columns per 32-bit store)
  // and the natural-log lse. Rows past N_q were computed on zero queries and are dropped. A
  // row that saw no key has l = 0: its O is 0 (not 0·∞ = NaN) and its lse −∞.
  T* O = p.O + head * Nq * D;
  if constexpr (kViews) O = p.O + ft::head_start(v.strides.O, head, v.heads);
  const int64_t ldo = kViews ? v.strides.O.row : D;  // elements from one row of O to the next
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      row[mt][h].l = quad_sum(row[mt][h].l);
      const float inv_l = kKV && row[mt][h].l == 0.f ? 0.f : 1.f / row[mt][h].l;
      const int query = q0 + warp_row0 + mt * 16 + h * 8 + ft::tc::lane_group(lane);
      if (query >= Nq) continue;
#pragma unroll
      for (int ot = 0; ot < Tr::kOTiles; ++ot) {
        const int col = ot * 8 + 2 * ft::tc::lane_in_group(lane);
        *reinterpret_cast<uint32_t*>(O + int64_t(query) * ldo + col) =
            ft::tc::pack2<T>(o[mt][ot].c[2 * h] * inv_l, o[mt][ot].c[2 * h + 1] * inv_l);
      }
      if (ft::tc::lane_in_group(lane) == 0) p.lse[head * Nq + query] = ft::online_lse(row[mt][h]);
    }
}

}  // namespace ch07
