/// @file backward_tile.cuh
/// @brief What every step of chapter 10 computes the same way: the kernel's arguments, the
/// probabilities Pᵀ and the score gradients dSᵀ of one query tile from Sᵀ and dPᵀ on the
/// registers, and the accumulators turned into the next product's A operand.
#pragma once

#include <cstdint>

#include "core/strides.hpp"
#include "cuda_core/exp2.cuh"
#include "sm80/fragment.hpp"
#include "sm80/ldmatrix.cuh"  // ft::tc::stmatrix_x4
#include "sm80/pack.cuh"
#include "sm90/smem_layout.hpp"
#include "sm90/wgmma.cuh"

#include "10_hopper_backward/backward_traits.cuh"  // kDqShareFloats

namespace ch10 {

/// The kernel's arguments: the tensors' base pointers, contiguous [B][H][N][d] for the
/// contiguous kernels (steps 2-5's views instantiations read Q, K, V and dO through their
/// tensor maps and store dK and dV where GradStrides says; convert_dq writes dQ where its
/// strides say); lengths and heads of the general problem (problem.hpp).
template <class T>
struct Params {
  const T* Q;
  const T* K;
  const T* V;
  const T* dO;
  const float* L2;    ///< [B, H_q, stats_rows]: the forward's log-sum-exp · log2(e); −∞ past N_q
  const float* Drow;  ///< [B, H_q, stats_rows]: rowsum(dO∘O); 0 past N_q
  float* dq_acc;      ///< [B, H_q, N_q, d] float32, zero on entry (kDqTiles: stats_rows·d a head, in tiles)
  T* dK;
  T* dV;
  int Nq;
  int Nk;
  int stats_rows;     ///< N_q rounded up to whole query tiles: L2's and Drow's rows a head
  int num_q_tiles;    ///< ceil(N_q / Br)
  int num_kv_tiles;   ///< ceil(N_k / Bc)
  int heads_q;
  int heads_kv;
  int group;          ///< query heads a key/value head
  int causal_offset;  ///< causal: key j visible to query i iff j <= i + causal_offset
  bool causal;
  float scale;        ///< softmax scale (folded into dS; step 8: into dK and dQ instead)
  float scale_log2;   ///< scale · log2(e)
  int work_items;     ///< key blocks: num_kv_tiles · B · H_kv (a block an item, or step 9's walk)
};

/// dK's and dV's strides (elements), read by the views kernels only: a kernel argument of
/// its own, outside Params (strides.hpp's ViewArgs says why), so that the contiguous kernels
/// are the ones measured.
struct GradStrides {
  ft::Strides dK;
  ft::Strides dV;
};

/// Whether any (query, key) pair of one warpgroup's 64 keys (key_base on) and the query tile
/// (Br queries, q0 on) weighs nothing: a key past N_k, a query past N_q, or (causal) a key
/// after the diagonal of the tile's first query. If none does, every query of the tile sees
/// all 64 keys, so its L is finite, and the tile needs no check at all (step 8).
template <int Br, class P>
FT_TC_HD inline bool needs_mask(const P& p, int key_base, int q0) {
  return key_base + ft::sm90::kMmaM > p.Nk || q0 + Br > p.Nq ||
         (p.causal && key_base + ft::sm90::kMmaM - 1 > q0 + p.causal_offset);
}

/// Pᵀ and dSᵀ of one warpgroup's 64 keys × Br queries: from `st`, Sᵀ (raw scores), into
/// `pt`, Pᵀ = 2^(Sᵀ·scale·log2 e − L·log2 e); from `dpt`, dPᵀ, into `dst`,
/// dSᵀ = scale · Pᵀ∘(dPᵀ − D) (kWithDs; else Pᵀ alone, dpt and dst untouched). Row = key
/// (key_base on), column = query (q0 on); L·log2 e and D a query each (Ls, Dsm: shared
/// memory). kMasked: a key past N_k or after the query's diagonal, or a query that saw no key
/// or lies past N_q (L = −∞), weighs nothing; without it (a tile needs_mask clears) no element
/// is checked. kScaleDs false (step 8): dSᵀ = Pᵀ∘(dPᵀ − D), the scale left to dK's store and
/// dQ's conversion, once an element of the result instead of once a score.
///
/// kPairedStats (step 8 at d = 128): a thread's columns come in adjacent pairs (acc_col(t, 4j)
/// even, acc_col(t, 4j + 1) the next; registers 4j + 2 and 4j + 3 the same two columns 8 rows
/// down), so L and D are read a pair at a time, one 64-bit load for two columns: half the loads.
template <bool kWithDs = true, bool kMasked = true, bool kScaleDs = true, bool kPairedStats = false, int kRegs,
          class P>
__device__ __forceinline__ void probabilities_and_ds(const float (&st)[kRegs], const float (&dpt)[kRegs],
                                                     float (&pt)[kRegs], float (&dst)[kRegs], const P& p,
                                                     int key_base, int q0, int t, const float* Ls, const float* Dsm) {
  float2 l_pair{}, d_pair{};  // kPairedStats: L and D of columns acc_col(t, 4j) and + 1
#pragma unroll
  for (int i = 0; i < kRegs; ++i) {
    const int key = key_base + ft::sm90::acc_row(t, i);
    const int col = ft::sm90::acc_col(t, i);
    if (kPairedStats && i % 4 == 0) {  // col is even, and Ls and Dsm 8-byte aligned
      l_pair = *reinterpret_cast<const float2*>(Ls + col);
      if constexpr (kWithDs) d_pair = *reinterpret_cast<const float2*>(Dsm + col);
    }
    const float l = kPairedStats ? (i % 2 ? l_pair.y : l_pair.x) : Ls[col];
    const bool visible = !kMasked || (key < p.Nk && l != -INFINITY && (!p.causal || key <= q0 + col + p.causal_offset));
    const float prob = visible ? ft::exp2_ftz(fmaf(st[i], p.scale_log2, -l)) : 0.f;
    pt[i] = prob;
    if constexpr (kWithDs) {
      const float d = kPairedStats ? (i % 2 ? d_pair.y : d_pair.x) : Dsm[col];
      const float ds = prob * (dpt[i] - d);
      dst[i] = kScaleDs ? p.scale * ds : ds;
    }
  }
}

/// The same in place: Sᵀ becomes Pᵀ, dPᵀ becomes dSᵀ.
template <int kRegs, class P>
__device__ __forceinline__ void probabilities_and_ds(float (&st)[kRegs], float (&dpt)[kRegs], const P& p,
                                                     int key_base, int q0, int t, const float* Ls,
                                                     const float* Dsm) {
  probabilities_and_ds(st, dpt, st, dpt, p, key_base, q0, t, Ls, Dsm);
}

/// The same as a step computes it: steps 1-7 check every element and scale dSᵀ; step 8
/// (Tr::kLean) checks only the tiles that needs_mask says can hold a hidden pair, and leaves
/// the scale to dK and dQ.
template <class Tr, int kRegs, class P>
__device__ __forceinline__ void tile_probabilities_and_ds(float (&st)[kRegs], float (&dpt)[kRegs], const P& p,
                                                          int key_base, int q0, int t, const float* Ls,
                                                          const float* Dsm) {
  if constexpr (Tr::kLean) {
    if (needs_mask<Tr::Br>(p, key_base, q0))
      probabilities_and_ds<true, true, false, Tr::kWideShared>(st, dpt, st, dpt, p, key_base, q0, t, Ls, Dsm);
    else
      probabilities_and_ds<true, false, false, Tr::kWideShared>(st, dpt, st, dpt, p, key_base, q0, t, Ls, Dsm);
  } else {
    probabilities_and_ds(st, dpt, p, key_base, q0, t, Ls, Dsm);
  }
}

/// Step 7's halves of the same, each in place: Pᵀ from Sᵀ alone (while dPᵀ's product may
/// still run), then dSᵀ from Pᵀ and dPᵀ.
template <int kRegs, class P>
__device__ __forceinline__ void probabilities(float (&st)[kRegs], const P& p, int key_base, int q0, int t,
                                              const float* Ls) {
  probabilities_and_ds</*kWithDs=*/false>(st, st, st, st, p, key_base, q0, t, Ls, nullptr);
}
template <int kRegs, class P>
__device__ __forceinline__ void score_gradients(const float (&pt)[kRegs], float (&dpt)[kRegs], const P& p, int t,
                                                const float* Dsm) {
#pragma unroll
  for (int i = 0; i < kRegs; ++i) dpt[i] = p.scale * pt[i] * (dpt[i] - Dsm[ft::sm90::acc_col(t, i)]);
}

/// Accumulator registers as A fragments of the next product (chapter 07's trick, wgmma's
/// accumulator having mma.sync's layout): 16 columns a k-step, rounded to T.
template <class T, int kAcc>
__device__ __forceinline__ void pack_a(uint32_t (&a)[kAcc / 8][4], const float (&acc)[kAcc]) {
#pragma unroll
  for (int kk = 0; kk < kAcc / 8; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) a[kk][r] = ft::tc::pack2<T>(acc[8 * kk + 2 * r], acc[8 * kk + 2 * r + 1]);
}

/// Sᵀ = K_c·Qᵀ and dPᵀ = V_c·dOᵀ of one warpgroup's 64 keys (K_c, V_c at k_addr, v_addr;
/// the query tile's Q and dO at q_addr, do_addr, all K-major), issued as one group, or
/// (kTwoGroups) as two, Sᵀ's first, so that a wait for one group leaves dPᵀ's running. Each
/// operand's descriptor is built once and advanced a k-step at a time (sm90::advance), here
/// and in the products below.
template <class Tr, bool kTwoGroups = false>
__device__ __forceinline__ void issue_scores_transposed(float (&st)[Tr::Br / 2], float (&dpt)[Tr::Br / 2],
                                                        uint32_t k_addr, uint32_t v_addr, uint32_t q_addr,
                                                        uint32_t do_addr) {
  using T = typename Tr::T;
  using KvTile = typename Tr::KvTile;
  using QTile = typename Tr::QTile;
  using ft::sm90::advance;
  using ft::sm90::k_major_offset;
  const uint64_t k = ft::sm90::k_major_descriptor<KvTile>(k_addr, 0), q = ft::sm90::k_major_descriptor<QTile>(q_addr, 0);
  const uint64_t v = ft::sm90::k_major_descriptor<KvTile>(v_addr, 0), dO = ft::sm90::k_major_descriptor<QTile>(do_addr, 0);
  ft::sm90::fence();
#pragma unroll
  for (int ks = 0; ks < Tr::D / ft::sm90::kMmaK; ++ks)
    ft::sm90::mma_ss<T, Tr::Br>(st, advance(k, k_major_offset<KvTile>(ks)), advance(q, k_major_offset<QTile>(ks)),
                                ks > 0);
  if constexpr (kTwoGroups) ft::sm90::commit();
#pragma unroll
  for (int ks = 0; ks < Tr::D / ft::sm90::kMmaK; ++ks)
    ft::sm90::mma_ss<T, Tr::Br>(dpt, advance(v, k_major_offset<KvTile>(ks)), advance(dO, k_major_offset<QTile>(ks)),
                                ks > 0);
  ft::sm90::commit();
}

/// The same, waited for.
template <class Tr>
__device__ __forceinline__ void scores_transposed(float (&st)[Tr::Br / 2], float (&dpt)[Tr::Br / 2], uint32_t k_addr,
                                                  uint32_t v_addr, uint32_t q_addr, uint32_t do_addr) {
  issue_scores_transposed<Tr>(st, dpt, k_addr, v_addr, q_addr, do_addr);
  ft::sm90::wait<0>();
  ft::sm90::fence_registers(st);
  ft::sm90::fence_registers(dpt);
}

/// dV += Pᵀ·dO: A from registers (pa), dO MN-major (k = queries); issued, not committed:
/// issue_dk closes the group (step 7 commits it alone). Between the two the caller stores
/// dSᵀ (store_ds) from the registers dK is about to read: once dK is issued, reading them is
/// undefined until the wait that covers it (the PTX ISA), and dV's product runs while they
/// are stored.
template <class Tr>
__device__ __forceinline__ void issue_dv(float (&dv)[Tr::D / 2], const uint32_t (&pa)[Tr::Br / ft::sm90::kMmaK][4],
                                         uint32_t do_addr) {
  const uint64_t dO = ft::sm90::mn_major_descriptor<typename Tr::QTile>(do_addr, 0);
  ft::sm90::fence();
#pragma unroll
  for (int kk = 0; kk < Tr::Br / ft::sm90::kMmaK; ++kk)
    ft::sm90::mma_rs<typename Tr::T, Tr::D, /*kTransB=*/true>(dv, pa[kk],
                                                              ft::sm90::advance(dO, ft::sm90::mn_major_offset(kk)), true);
}

/// dK += dSᵀ·Q: A from registers (dsa), Q MN-major; issued and committed with issue_dv's
/// product as one group, not waited for. The fence orders store_ds's reads of dsa before it.
template <class Tr>
__device__ __forceinline__ void issue_dk(float (&dk)[Tr::D / 2], const uint32_t (&dsa)[Tr::Br / ft::sm90::kMmaK][4],
                                         uint32_t q_addr) {
  const uint64_t q = ft::sm90::mn_major_descriptor<typename Tr::QTile>(q_addr, 0);
  ft::sm90::fence();
#pragma unroll
  for (int kk = 0; kk < Tr::Br / ft::sm90::kMmaK; ++kk)
    ft::sm90::mma_rs<typename Tr::T, Tr::D, /*kTransB=*/true>(dk, dsa[kk],
                                                              ft::sm90::advance(q, ft::sm90::mn_major_offset(kk)), true);
  ft::sm90::commit();
}

/// dSᵀ (packed, as pack_a left it) into shared memory, rows 64·wg on: the A operand that
/// dQ = dS·K reads transposed. Register pair (i, i + 1) is A fragment (i / 8, i % 8 / 2).
template <class DsTile, class T, int kSteps>
__device__ __forceinline__ void store_ds(T* dSs, const uint32_t (&dsa)[kSteps][4], int wg, int t) {
#pragma unroll
  for (int i = 0; i < kSteps * 8; i += 2) {
    const int row = wg * ft::sm90::kMmaM + ft::sm90::acc_row(t, i);
    *reinterpret_cast<uint32_t*>(dSs + DsTile::offset(row, ft::sm90::acc_col(t, i))) = dsa[i / 8][i % 8 / 2];
  }
}

/// Where `lane` points stmatrix for k-step kk of its warp's dSᵀ rows: (row, column) in the
/// warp's 16 rows × Br queries. dsa[kk] is an A fragment, register q its 8×8 block
/// a_block(q), each lane's pair in mma.sync's place: what stmatrix stores from register q, to
/// the rows lanes 8q to 8q + 7 name. So the lanes name the rows ldmatrix reads A from.
FT_TC_HD constexpr ft::tc::RowCol stmatrix_ds_row(int lane, int kk) {
  return ft::tc::ldmatrix_src_a(lane) + ft::tc::RowCol{0, kk * ft::sm90::kMmaK};
}

/// The same stores by stmatrix (step 8 at d = 128): one instruction a k-step, four 32-bit
/// stores' worth a lane. Every row address starts an 8-column block, 16 bytes that the
/// 128-byte swizzle keeps together.
template <class DsTile, class T, int kSteps>
__device__ __forceinline__ void store_ds_stmatrix(T* dSs, const uint32_t (&dsa)[kSteps][4], int wg, int t) {
  const int warp_row = wg * ft::sm90::kMmaM + t / 32 * 16;
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk) {
    const ft::tc::RowCol at = stmatrix_ds_row(t % 32, kk);
    ft::tc::stmatrix_x4(dSs + DsTile::offset(warp_row + at.row, at.col), dsa[kk]);
  }
}

/// Where dQ's float32 accumulator keeps element (row, column) of a query tile when it is laid
/// out in the consumers' register order (Tr::kDqTiles): a consumer's 64 × 64 share is 1024
/// float4, j·128 + t for thread t's registers 4j to 4j + 3 (rows r and r + 8, columns c and
/// c + 1: acc_row, acc_col), so that a warp's float4 stores are 512 contiguous bytes; the
/// shares follow one another, consumer 0's first. `share` is the consumer, (t, i) the thread
/// and register; the inverse, for the conversion, is dq_tile_element.
FT_TC_HD constexpr int dq_tile_offset(int share, int t, int i) {
  return share * kDqShareFloats + ((i / 4) * ft::sm90::kWarpgroupThreads + t) * 4 + i % 4;
}
/// The consumer thread and register whose element lies at `offset` of a share (below kDqShareFloats).
struct DqTileElement {
  int t, i;
};
FT_TC_HD constexpr DqTileElement dq_tile_element(int offset) {
  return {offset / 4 % ft::sm90::kWarpgroupThreads, offset / (4 * ft::sm90::kWarpgroupThreads) * 4 + offset % 4};
}
/// The (row, column) of a query tile's dQ whose float lies at `in_tile` of the accumulator's
/// tile: what convert_dq_tiles writes where (its share's place, then dq_tile_element).
template <class Tr>
FT_TC_HD constexpr ft::tc::RowCol dq_tile_place(int in_tile) {
  const int share = in_tile / kDqShareFloats;
  const DqTileElement e = dq_tile_element(in_tile % kDqShareFloats);
  return {Tr::share_row0(share) + ft::sm90::acc_row(e.t, e.i), Tr::share_col0(share) + ft::sm90::acc_col(e.t, e.i)};
}

/// dK and dV of one warpgroup's 64 keys (keys key_base on) of key/value head kv_head
/// (b·H_kv + h), written once: contiguous, or (Tr::kViews) where their strides say.
template <class Tr, int kRegs>
__device__ __forceinline__ void store_dk_dv(const Params<typename Tr::T>& p, const GradStrides& gs, int kv_head,
                                            const float (&dk)[kRegs], const float (&dv)[kRegs], int key_base, int t) {
  using T = typename Tr::T;
  constexpr int D = Tr::D;
  T* dK = p.dK + int64_t(kv_head) * p.Nk * D;
  T* dV = p.dV + int64_t(kv_head) * p.Nk * D;
  if constexpr (Tr::kViews) {
    dK = p.dK + ft::head_start(gs.dK, kv_head, p.heads_kv);
    dV = p.dV + ft::head_start(gs.dV, kv_head, p.heads_kv);
  }
  const float s = Tr::kLean ? p.scale : 1.f;  // step 8 left dSᵀ unscaled: dK = scale · dSᵀQ
#pragma unroll
  for (int i = 0; i < kRegs; i += 2) {
    const int key = key_base + ft::sm90::acc_row(t, i);
    const int col = ft::sm90::acc_col(t, i);
    if (key < p.Nk) {
      const int64_t k_at = Tr::kViews ? key * gs.dK.row : int64_t(key) * D;
      const int64_t v_at = Tr::kViews ? key * gs.dV.row : int64_t(key) * D;
      *reinterpret_cast<uint32_t*>(dK + k_at + col) = ft::tc::pack2<T>(s * dk[i], s * dk[i + 1]);
      *reinterpret_cast<uint32_t*>(dV + v_at + col) = ft::tc::pack2<T>(dv[i], dv[i + 1]);
    }
  }
}

}  // namespace ch10
