/// @file wgmma_forward.cuh
/// @brief Chapter 09's kernel. Step 1 (`wgmma`): chapter 07's fused forward with both
/// products on Hopper's warpgroup matrix instruction, the loads chapter 07's cp.async.
/// Step 2 (`tma`, Tr::kLoad = Load::kTma): the loads by the copy engine.
///
/// What changes against chapter 07 (flash_forward.cuh), and why. There, each warp fed
/// mma.sync 16×8×16 pieces: every operand fragment went through ldmatrix into registers,
/// one instruction per 16×8×16 product. Here a warpgroup (4 warps, 128 threads) owns 64
/// query rows and issues one wgmma for a 64×N×16 product, with K (and V) read by the tensor
/// cores straight from shared memory through a descriptor:
///
///     S  = Q·Kᵀ   64 × Bc    mma_ss: Q and K from shared memory (both K-major),
///                            d/16 instructions per K/V tile
///     O += P·V    64 × d     mma_rs: P from registers (S's accumulator, rounded, is already
///                            mma.sync's A layout), V from shared memory (MN-major),
///                            Bc/16 instructions per K/V tile
///
/// The online softmax between them is chapter 07's, on the accumulator's registers (each
/// thread holds two rows; a row's four holders are neighbouring lanes, as before). The
/// wgmmas are asynchronous, but this step waits for each product right after issuing it:
/// it shows what the instruction alone buys. The copies are chapter 07's cp.async, two
/// K/V stages, into the 128-byte-swizzled panels wgmma reads (sm90/smem_layout.hpp), and
/// fenced for the async proxy before the barrier that publishes them.
///
/// Step 2, TMA. One thread names each box (Q's, then each K and V tile's, one box a 64-column
/// panel) with its coordinates in a tensor map (sm90/tma.hpp); the copy engine fetches it,
/// swizzles it into the panel layout, zero-fills rows past N, and counts its bytes down an
/// mbarrier a stage (sm90/mbarrier.cuh); every thread waits on the stage's phase instead of
/// its own cp.async group. What it removes: the 16 to 32 cp.async a thread a tile, their
/// address arithmetic, the zero-fill tests, and the proxy fence (the copy engine writes
/// through the async proxy that wgmma reads). The pipeline is still step 1's: tile j + 1
/// is requested while tile j is computed, and a block barrier frees a stage.
///
/// Every problem the contract allows: two lengths, grouped heads (query head h reads K/V
/// head h / group), both causal alignments, rows past N zero-filled and dropped, views
/// (every row address from its stride: one instantiation per dtype and d).
#pragma once

#include <cstdint>

#include "09_hopper_forward/forward_traits.cuh"
#include "core/strides.hpp"
#include "cuda_core/exp2.cuh"
#include "cuda_core/online_softmax.cuh"
#include "cuda_core/reduce.cuh"
#include "sm80/cp_async.cuh"
#include "sm80/pack.cuh"
#include "sm90/mbarrier.cuh"
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
  int group;         ///< query heads per key/value head
  int causal_offset; ///< causal: key j visible to query i iff j <= i + causal_offset
  bool causal;
  float scale_log2;  ///< softmax scale · log2(e)
};

/// A row's max and sum over the 4 lanes that hold it (cuda_core/reduce.cuh).
using ft::quad_max;
using ft::quad_sum;

/// The tensor maps of Q, K and V (Load::kTma; unused by cp.async), kernel parameters.
template <class Tr>
__global__ void __launch_bounds__(Tr::kThreads, 1) wgmma_forward(const Params<typename Tr::T> p,
                                                                  const ft::ViewArgs v,
                                                                  const __grid_constant__ CUtensorMap map_q,
                                                                  const __grid_constant__ CUtensorMap map_k,
                                                                  const __grid_constant__ CUtensorMap map_v) {
  using T = typename Tr::T;
  using QTile = typename Tr::QTile;
  using KvTile = typename Tr::KvTile;
  constexpr int D = Tr::D, Br = Tr::Br, Bc = Tr::Bc;
  constexpr int kS = Bc / 2, kO = D / 2;  // accumulator registers a thread: S, O

  // Shared memory, each tile on a 1024-byte boundary (the swizzle's period): Q, then
  // kStages × (K, V).
  extern __shared__ uint8_t smem_raw[];
  const uintptr_t base = (reinterpret_cast<uintptr_t>(smem_raw) + ft::sm90::kAtomBytes - 1) /
                         ft::sm90::kAtomBytes * ft::sm90::kAtomBytes;
  T* const Qs = reinterpret_cast<T*>(base);
  T* const Ks = Qs + QTile::kBytes / sizeof(T);
  T* const Vs = Ks + KvTile::kBytes / sizeof(T);
  constexpr int kStageElems = 2 * KvTile::kBytes / sizeof(T);  // one stage: K and V
  uint64_t* const bars = reinterpret_cast<uint64_t*>(Ks + Tr::kStages * kStageElems);  // one a stage
  constexpr bool kTma = Tr::kLoad == Load::kTma;

  const int wg = threadIdx.x / ft::sm90::kWarpgroupThreads;  // this warpgroup: rows 64·wg on
  const int t = threadIdx.x % ft::sm90::kWarpgroupThreads;   // thread within it
  // Last query tile first: under the causal mask it has the most key tiles (chapter 04).
  const int q0 = (p.num_q_tiles - 1 - int(blockIdx.x % p.num_q_tiles)) * Br;
  const int64_t head = blockIdx.x / p.num_q_tiles;  // b·H_q + h
  const int64_t kv_head = head / p.group;          // b·H_kv + h / group
  const T* Q = p.Q + ft::head_start(v.strides.Q, head, v.heads);
  const T* K = p.K + ft::head_start(v.strides.K, kv_head, v.heads_kv);
  const T* V = p.V + ft::head_start(v.strides.V, kv_head, v.heads_kv);
  const int ldq = int(v.strides.Q.row), ldk = int(v.strides.K.row), ldv = int(v.strides.V.row);

  // Causal: no key tile past the one holding the last key the tile's last query sees; a
  // tile whose queries see no key (bottom-right, N_q > N_k) has none.
  const int kv_end = p.causal ? min(p.Nk, q0 + Br + p.causal_offset) : p.Nk;
  const int num_kv_tiles = kv_end <= 0 ? 0 : (kv_end + Bc - 1) / Bc;

  // TMA's coordinates: (column, row, head, batch) of the [B][H][N][d] tensors.
  const int q_head = int(head % v.heads), q_batch = int(head / v.heads);
  const int k_head = int(kv_head % v.heads_kv), k_batch = int(kv_head / v.heads_kv);
  // A stage's barrier takes one arrival a phase (barrier_init below): the thread that
  // issues the copies arrives once, announcing every byte the phase will bring.
  auto load_kv = [&](int j, int stage, uint32_t extra_bytes = 0) {
    T* k_dst = Ks + stage * kStageElems;
    T* v_dst = k_dst + KvTile::kBytes / sizeof(T);
    if constexpr (kTma) {  // one thread: the bytes, then a box a panel of K and of V
      ft::sm90::arrive_expect_tx(&bars[stage], 2 * KvTile::kBytes + extra_bytes);
#pragma unroll
      for (int pnl = 0; pnl < KvTile::kPanels; ++pnl) {
        const int col = pnl * ft::sm90::kPanelCols;
        ft::sm90::copy_box(k_dst + pnl * KvTile::kPanelElems, &map_k, col, j * Bc, k_head, k_batch, &bars[stage]);
        ft::sm90::copy_box(v_dst + pnl * KvTile::kPanelElems, &map_v, col, j * Bc, k_head, k_batch, &bars[stage]);
      }
    } else {
      ft::tc::copy_tile_async<KvTile, Bc, Tr::kThreads>(k_dst, K, j * Bc, p.Nk, ldk);
      ft::tc::copy_tile_async<KvTile, Bc, Tr::kThreads>(v_dst, V, j * Bc, p.Nk, ldv);
      ft::tc::cp_async_commit();
    }
  };
  if constexpr (kTma) {
    if (threadIdx.x == 0)
      for (int s = 0; s < Tr::kStages; ++s) ft::sm90::barrier_init(&bars[s], 1);
    __syncthreads();  // the barriers exist before anyone arrives or waits
    if (threadIdx.x == 0) {  // Q rides on stage 0's barrier with K/V tile 0: one arrival for both
      if (num_kv_tiles > 0) load_kv(0, 0, QTile::kBytes);
      else ft::sm90::arrive_expect_tx(&bars[0], QTile::kBytes);
#pragma unroll
      for (int pnl = 0; pnl < QTile::kPanels; ++pnl)
        ft::sm90::copy_box(Qs + pnl * QTile::kPanelElems, &map_q, pnl * ft::sm90::kPanelCols, q0, q_head, q_batch, &bars[0]);
    }
    if (num_kv_tiles == 0) ft::sm90::wait(&bars[0], 0);  // nothing to compute: Q lands, unused
  } else {
    ft::tc::copy_tile_async<QTile, Br, Tr::kThreads>(Qs, Q, q0, p.Nq, ldq);
    if (num_kv_tiles > 0) load_kv(0, 0);
    else ft::tc::cp_async_commit(), ft::tc::cp_async_wait<0>();  // nothing to compute: Q lands, unused
  }

  float o[kO];
#pragma unroll
  for (int i = 0; i < kO; ++i) o[i] = 0.f;
  ft::OnlineSoftmax row[2] = {ft::online_softmax_empty(), ft::online_softmax_empty()};
  const uint32_t q_addr = uint32_t(__cvta_generic_to_shared(Qs)) + wg * ft::sm90::kMmaM * ft::sm90::kSwizzleBytes;

  for (int j = 0; j < num_kv_tiles; ++j) {
    const int stage = j % Tr::kStages;
    if constexpr (kTma) {
      // Tile j + 1 into the other stage (freed by the barrier that ended tile j − 1), then
      // wait for tile j: stage s serves tiles s, s + 2, ..., its phases alternating.
      if (threadIdx.x == 0 && j + 1 < num_kv_tiles) load_kv(j + 1, (j + 1) % Tr::kStages);
      ft::sm90::wait(&bars[stage], (j / Tr::kStages) & 1);
    } else {
      if (j + 1 < num_kv_tiles) {  // tile j+1 flies while tile j is computed
        load_kv(j + 1, (j + 1) % Tr::kStages);
        ft::tc::cp_async_wait<1>();
      } else {
        ft::tc::cp_async_wait<0>();
      }
      ft::sm90::fence_proxy_async();  // cp.async's writes, before the tensor cores read them
      __syncthreads();
    }
    const T* Kj = Ks + stage * kStageElems;
    const T* Vj = Kj + KvTile::kBytes / sizeof(T);
    const uint32_t k_addr = uint32_t(__cvta_generic_to_shared(Kj));
    const uint32_t v_addr = uint32_t(__cvta_generic_to_shared(Vj));

    // S = Q·Kᵀ: d/16 wgmmas, then wait for them.
    float s[kS];
    ft::sm90::fence();
#pragma unroll
    for (int ks = 0; ks < D / ft::sm90::kMmaK; ++ks)
      ft::sm90::mma_ss<T, Bc>(s, ft::sm90::k_major_descriptor<QTile>(q_addr, ks),
                              ft::sm90::k_major_descriptor<KvTile>(k_addr, ks), ks > 0);
    ft::sm90::commit();
    ft::sm90::wait<0>();
    ft::sm90::fence_registers(s);

    // Keys past N, and (causal) after the query's diagonal, weigh nothing. Only the tiles
    // that cross the diagonal or run past N_k have any.
    const int kv0 = j * Bc;
    const bool masked = kv0 + Bc > p.Nk || (p.causal && kv0 + Bc - 1 > q0 + p.causal_offset);
    if (masked) {
#pragma unroll
      for (int i = 0; i < kS; ++i) {
        const int query = q0 + wg * ft::sm90::kMmaM + ft::sm90::acc_row(t, i);
        const int key = kv0 + ft::sm90::acc_col(t, i);
        if (key >= p.Nk || (p.causal && key > query + p.causal_offset)) s[i] = -INFINITY;
      }
    }

    // The online softmax: registers 4c + 0, 1 hold row h = 0's scores, 4c + 2, 3 row h = 1's.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int c = 0; c < kS / 4; ++c) tile_max = fmaxf(tile_max, fmaxf(s[4 * c + 2 * h], s[4 * c + 2 * h + 1]));
      const float alpha = ft::online_rescale(row[h], quad_max(tile_max) * p.scale_log2);
#pragma unroll
      for (int c = 0; c < kO / 4; ++c) o[4 * c + 2 * h] *= alpha, o[4 * c + 2 * h + 1] *= alpha;
      const float exp_base = ft::online_exp_base(row[h].m);
      float sum = 0.f;
#pragma unroll
      for (int c = 0; c < kS / 4; ++c)
#pragma unroll
        for (int e = 2 * h; e < 2 * h + 2; ++e) {
          s[4 * c + e] = ft::exp2_ftz(fmaf(s[4 * c + e], p.scale_log2, -exp_base));
          sum += s[4 * c + e];
        }
      row[h].l += sum;
    }

    // O += P·V: 16 keys a wgmma; P's A registers are S's accumulator of those keys, rounded,
    // all of them before the fence (a register written between two wgmmas would make the
    // compiler fence again before each one: ptxas's C7519 note).
    uint32_t pa[Bc / ft::sm90::kMmaK][4];
#pragma unroll
    for (int kk = 0; kk < Bc / ft::sm90::kMmaK; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) pa[kk][r] = ft::tc::pack2<T>(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
    ft::sm90::fence();
#pragma unroll
    for (int kk = 0; kk < Bc / ft::sm90::kMmaK; ++kk)
      ft::sm90::mma_rs<T, D, /*kTransB=*/true>(o, pa[kk], ft::sm90::mn_major_descriptor<KvTile>(v_addr, kk), true);
    ft::sm90::commit();
    ft::sm90::wait<0>();
    ft::sm90::fence_registers(o);
    __syncthreads();  // every warpgroup is done with this stage before it is refilled
  }

  // O / l and the lse, rows past N_q dropped; a row that saw no key: O = 0, lse = −∞.
  T* O = p.O + ft::head_start(v.strides.O, head, v.heads);
  const int64_t ldo = v.strides.O.row;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row[h].l = quad_sum(row[h].l);
    const float inv_l = row[h].l == 0.f ? 0.f : 1.f / row[h].l;
    const int query = q0 + wg * ft::sm90::kMmaM + ft::sm90::acc_row(t, 2 * h);
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
