/// @file forward_tile.cuh
/// @brief What every chapter-09 kernel does with one K/V tile, whoever loads it and however
/// the warpgroups take turns: the two products on wgmma, the mask, the online softmax on
/// the accumulator's registers, P packed as the next product's A operand, and the output.
/// One warpgroup's view: 64 query rows, each thread holding two of them (registers
/// 4c + 0, 1 row h = 0; 4c + 2, 3 row h = 1: sm90/smem_layout.hpp draws it).
///
/// The kernels (wgmma_forward.cuh, specialized_forward.cuh) differ only in where the tiles
/// come from and when each warpgroup issues these; the arithmetic is here, once.
#pragma once

#include <cstdint>

#include "core/strides.hpp"
#include "cuda_core/exp2.cuh"
#include "cuda_core/online_softmax.cuh"
#include "cuda_core/reduce.cuh"
#include "sm80/pack.cuh"
#include "sm90/wgmma.cuh"

namespace ch09 {

/// The kernel's arguments (every length and index of the general problem: problem.hpp).
template <class T>
struct Params {
  const T* Q;
  const T* K;
  const T* V;
  T* O;
  float* lse;        ///< natural-log log-sum-exp per query row, [B, H_q, N_q]
  int Nq;            ///< queries per head
  int Nk;            ///< keys (and values) per head
  int num_q_tiles;   ///< ceil(N_q / Br)
  int num_tiles;     ///< query tiles of the whole problem: num_q_tiles · B · H_q
  int group;         ///< query heads per key/value head
  int causal_offset; ///< causal: key j visible to query i iff j <= i + causal_offset
  bool causal;
  float scale_log2;  ///< softmax scale · log2(e)
};

/// A row's max and sum over the 4 lanes that hold it (cuda_core/reduce.cuh).
using ft::quad_max;
using ft::quad_sum;

/// Issues S = Q·Kᵀ for one warpgroup: d/16 wgmmas over Q's 64 rows at `q_addr` and the
/// Bc keys at `k_addr` (both K-major swizzled tiles). Not committed: the caller groups it.
template <class Tr>
__device__ __forceinline__ void issue_qk(float (&s)[Tr::Bc / 2], uint32_t q_addr, uint32_t k_addr) {
#pragma unroll
  for (int ks = 0; ks < Tr::D / ft::sm90::kMmaK; ++ks)
    ft::sm90::mma_ss<typename Tr::T, Tr::Bc>(s, ft::sm90::k_major_descriptor<typename Tr::QTile>(q_addr, ks),
                                             ft::sm90::k_major_descriptor<typename Tr::KvTile>(k_addr, ks), ks > 0);
}

/// Issues O += P·V: Bc/16 wgmmas, P from registers, V MN-major at `v_addr`. Not committed.
template <class Tr>
__device__ __forceinline__ void issue_pv(float (&o)[Tr::D / 2], const uint32_t (&pa)[Tr::Bc / ft::sm90::kMmaK][4],
                                         uint32_t v_addr) {
#pragma unroll
  for (int kk = 0; kk < Tr::Bc / ft::sm90::kMmaK; ++kk)
    ft::sm90::mma_rs<typename Tr::T, Tr::D, /*kTransB=*/true>(
        o, pa[kk], ft::sm90::mn_major_descriptor<typename Tr::KvTile>(v_addr, kk), true);
}

/// Keys past N, and (causal) after the query's diagonal, weigh nothing. Only the tiles that
/// cross the diagonal or run past N_k have any; `row0` is this warpgroup's first query row.
template <class T, int kS>
__device__ __forceinline__ void mask_scores(float (&s)[kS], const Params<T>& p, int row0, int kv0, int t) {
  constexpr int Bc = 2 * kS;  // the tile's keys: S holds Bc / 2 of them a thread
  const bool masked = kv0 + Bc > p.Nk || (p.causal && kv0 + Bc - 1 > row0 + p.causal_offset);
  if (!masked) return;
#pragma unroll
  for (int i = 0; i < kS; ++i) {
    const int query = row0 + ft::sm90::acc_row(t, i);
    const int key = kv0 + ft::sm90::acc_col(t, i);
    if (key >= p.Nk || (p.causal && key > query + p.causal_offset)) s[i] = -INFINITY;
  }
}

/// The online softmax of one tile (chapter 03's update, chapter 07's placement), O aside:
/// for each of the thread's two rows, the tile's max over the row's 4 holders, then
/// s[i] = 2^(s[i]·scale − m) in place (P, unnormalized) and its sum into l. Returns in
/// alpha each row's factor 2^(m_old − m_new), by which O must still be rescaled.
template <int kS>
__device__ __forceinline__ void softmax_scores(float (&s)[kS], ft::OnlineSoftmax (&row)[2], float scale_log2,
                                               float (&alpha)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float tile_max = -INFINITY;
#pragma unroll
    for (int c = 0; c < kS / 4; ++c) tile_max = fmaxf(tile_max, fmaxf(s[4 * c + 2 * h], s[4 * c + 2 * h + 1]));
    alpha[h] = ft::online_rescale(row[h], quad_max(tile_max) * scale_log2);
    const float exp_base = ft::online_exp_base(row[h].m);
    float sum = 0.f;
#pragma unroll
    for (int c = 0; c < kS / 4; ++c)
#pragma unroll
      for (int e = 2 * h; e < 2 * h + 2; ++e) {
        s[4 * c + e] = ft::exp2_ftz(fmaf(s[4 * c + e], scale_log2, -exp_base));
        sum += s[4 * c + e];
      }
    row[h].l += sum;
  }
}

/// O's two rows of this thread times their alpha.
template <int kO>
__device__ __forceinline__ void rescale_o(float (&o)[kO], const float (&alpha)[2]) {
#pragma unroll
  for (int c = 0; c < kO / 4; ++c)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[4 * c + e] *= alpha[e / 2];
}

/// The online softmax of one tile, O rescaled at once: what a kernel whose P·V of the last
/// tile has finished does.
template <int kS, int kO>
__device__ __forceinline__ void softmax_tile(float (&s)[kS], float (&o)[kO], ft::OnlineSoftmax (&row)[2],
                                             float scale_log2) {
  float alpha[2];
  softmax_scores(s, row, scale_log2, alpha);
  rescale_o(o, alpha);
}

/// P's A registers for O += P·V: 16 keys a wgmma, S's accumulator of those keys rounded to
/// T. All of them before the product's fence (a register written between two wgmmas would
/// make the compiler fence again before each one: ptxas's C7519 note).
template <class T, int kS>
__device__ __forceinline__ void pack_p(uint32_t (&pa)[kS / 8][4], const float (&s)[kS]) {
#pragma unroll
  for (int kk = 0; kk < kS / 8; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) pa[kk][r] = ft::tc::pack2<T>(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
}

/// O / l and the lse, rows past N_q dropped; a row that saw no key: O = 0, lse = −∞.
/// `row0` is this warpgroup's first query row, `head` the grid's b·H_q + h.
template <class T, int kO>
__device__ __forceinline__ void store_output(const Params<T>& p, const ft::ViewArgs& v, int64_t head, int row0,
                                             int t, const float (&o)[kO], ft::OnlineSoftmax (&row)[2]) {
  T* O = p.O + ft::head_start(v.strides.O, head, v.heads);
  const int64_t ldo = v.strides.O.row;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row[h].l = quad_sum(row[h].l);
    const float inv_l = row[h].l == 0.f ? 0.f : 1.f / row[h].l;
    const int query = row0 + ft::sm90::acc_row(t, 2 * h);
    if (query >= p.Nq) continue;
#pragma unroll
    for (int c = 0; c < kO / 4; ++c) {
      const int i = 4 * c + 2 * h;
      *reinterpret_cast<uint32_t*>(O + int64_t(query) * ldo + ft::sm90::acc_col(t, i)) =
          ft::tc::pack2<T>(o[i] * inv_l, o[i + 1] * inv_l);
    }
    if (t % 4 == 0) p.lse[head * p.Nq + query] = ft::online_lse(row[h]);
  }
}

}  // namespace ch09
