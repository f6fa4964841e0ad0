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
/// its own cp.async group. What it removes: the 8 (d = 64) or 16 (d = 128) cp.async a thread a tile, their
/// address arithmetic, the zero-fill tests, and the proxy fence (the copy engine writes
/// through the async proxy that wgmma reads). The pipeline is still step 1's: tile j + 1
/// is requested while tile j is computed, and a block barrier frees a stage.
///
/// Every problem the contract allows: two lengths, grouped heads (query head h reads K/V
/// head h / group), both causal alignments, rows past N zero-filled and dropped, views
/// (every row address from its stride: one instantiation per dtype and d).
#pragma once

#include <cstdint>

#include "09_hopper_forward/forward_tile.cuh"
#include "09_hopper_forward/forward_traits.cuh"
#include "sm80/cp_async.cuh"
#include "sm90/mbarrier.cuh"

namespace ch09 {

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

    const int row0 = q0 + wg * ft::sm90::kMmaM;  // this warpgroup's first query row

    // S = Q·Kᵀ, then wait for it.
    float s[kS];
    ft::sm90::fence();
    issue_qk<Tr>(s, q_addr, k_addr);
    ft::sm90::commit();
    ft::sm90::wait<0>();
    ft::sm90::fence_registers(s);

    mask_scores(s, p, row0, j * Bc, t);
    softmax_tile(s, o, row, p.scale_log2);

    // O += P·V, then wait for it.
    uint32_t pa[Bc / ft::sm90::kMmaK][4];
    pack_p<T>(pa, s);
    ft::sm90::fence();
    issue_pv<Tr>(o, pa, v_addr);
    ft::sm90::commit();
    ft::sm90::wait<0>();
    ft::sm90::fence_registers(o);
    __syncthreads();  // every warpgroup is done with this stage before it is refilled
  }

  store_output(p, v, head, q0 + wg * ft::sm90::kMmaM, t, o, row);
}

}  // namespace ch09
