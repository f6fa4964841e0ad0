/// @file wgmma_backward.cuh
/// @brief Chapter 10, step 1 (`wgmma`): chapter 08's backward with its five products on
/// Hopper's warpgroup instruction; the loads chapter 08's cp.async, each product waited for.
///
/// A block owns one K/V tile of Bc = 128 keys of one key/value head: two warpgroups, 64 keys
/// each. It walks every query tile (Br = 64 rows) of every query head that reads this K/V
/// head (grouped heads: the group's dK and dV are summed in registers, written once), and
/// per query tile warpgroup w (keys 64w to 64w + 63) computes
///
///     Sᵀ  = K_w·Qᵀ          mma_ss, M = 64 keys, N = 64 queries   K, Q K-major
///     dPᵀ = V_w·dOᵀ         mma_ss, likewise                      V, dO K-major
///     Pᵀ  = 2^(Sᵀ·scale·log2 e − L·log2 e),  dSᵀ = scale · Pᵀ∘(dPᵀ − D)   (registers)
///     dV += Pᵀ·dO           mma_rs, M = 64 keys, N = d            Pᵀ from registers, dO MN-major
///     dK += dSᵀ·Q           mma_rs, likewise                      dSᵀ from registers, Q MN-major
///     dQ_w = dS_w·K_w       mma_ss, M = 64 queries, N = d         dSᵀ from shared memory read
///                                                                  transposed (MN-major A), K MN-major
///
/// and adds dQ_w into the float32 accumulator (atomics: the two warpgroups and every K/V
/// tile add their shares). Computing the scores transposed puts keys on the accumulator's
/// rows, so Pᵀ and dSᵀ are already the A operands of dV's and dK's products (chapter 08's
/// idea, unchanged by the instruction). Only dQ needs dS the other way round: dSᵀ goes to
/// shared memory, and wgmma reads it back transposed.
#pragma once

#include <cstdint>

#include "10_hopper_backward/backward_tile.cuh"
#include "10_hopper_backward/backward_traits.cuh"
#include "sm80/cp_async.cuh"
#include "sm90/warp_roles.cuh"
#include "sm90/wgmma.cuh"

namespace ch10 {

template <class Tr>
__global__ void __launch_bounds__(Tr::kThreads, 1) wgmma_backward(const Params<typename Tr::T> p) {
  using T = typename Tr::T;
  using KvTile = typename Tr::KvTile;
  using QTile = typename Tr::QTile;
  using DsTile = typename Tr::DsTile;
  constexpr int D = Tr::D, Br = Tr::Br, Bc = Tr::Bc;
  constexpr int kS = Br / 2;  // Sᵀ's (and dPᵀ's) registers a thread: 64 keys × 64 queries
  constexpr int kO = D / 2;   // dK's, dV's, dQ's: 64 rows × d

  extern __shared__ uint8_t smem_raw[];
  T* const Ks = reinterpret_cast<T*>(ft::sm90::align_shared(smem_raw));
  T* const Vs = Ks + KvTile::kBytes / sizeof(T);
  T* const Qs = Vs + KvTile::kBytes / sizeof(T);
  T* const dOs = Qs + QTile::kBytes / sizeof(T);
  T* const dSs = dOs + QTile::kBytes / sizeof(T);  // dSᵀ: a row a key, Br queries
  float* const Ls = reinterpret_cast<float*>(dSs + DsTile::kBytes / sizeof(T));
  float* const Dsm = Ls + Br;

  const int wg = threadIdx.x / ft::sm90::kWarpgroupThreads;  // keys 64·wg on
  const int t = threadIdx.x % ft::sm90::kWarpgroupThreads;
  const int kv_tile = blockIdx.x % p.num_kv_tiles;
  const int kv_head = blockIdx.x / p.num_kv_tiles;  // b·H_kv + h_kv
  const int batch = kv_head / p.heads_kv;
  const int k0 = kv_tile * Bc;
  const int key_base = k0 + wg * ft::sm90::kMmaM;  // this warpgroup's first key

  const T* K = p.K + int64_t(kv_head) * p.Nk * D;
  const T* V = p.V + int64_t(kv_head) * p.Nk * D;
  ft::tc::copy_tile_async<KvTile, Bc, Tr::kThreads>(Ks, K, k0, p.Nk);
  ft::tc::copy_tile_async<KvTile, Bc, Tr::kThreads>(Vs, V, k0, p.Nk);
  ft::tc::cp_async_commit();

  const uint32_t k_addr = uint32_t(__cvta_generic_to_shared(Ks)) + wg * ft::sm90::kMmaM * ft::sm90::kSwizzleBytes;
  const uint32_t v_addr = uint32_t(__cvta_generic_to_shared(Vs)) + wg * ft::sm90::kMmaM * ft::sm90::kSwizzleBytes;
  const uint32_t q_addr = uint32_t(__cvta_generic_to_shared(Qs));
  const uint32_t do_addr = uint32_t(__cvta_generic_to_shared(dOs));
  const uint32_t ds_addr = uint32_t(__cvta_generic_to_shared(dSs)) + wg * ft::sm90::kMmaM * ft::sm90::kSwizzleBytes;

  float dk[kO], dv[kO];
#pragma unroll
  for (int i = 0; i < kO; ++i) dk[i] = dv[i] = 0.f;

  // Causal: the first query that sees this tile's first key (key k0 visible to query i iff
  // i >= k0 − offset); earlier query tiles contribute nothing.
  const int first_q_tile = p.causal ? max(0, k0 - p.causal_offset) / Br : 0;
  const int h_kv = kv_head % p.heads_kv;

  for (int g = 0; g < p.group; ++g) {
    const int head = batch * p.heads_q + h_kv * p.group + g;  // b·H_q + h: a query head of the group
    const T* Q = p.Q + int64_t(head) * p.Nq * D;
    const T* dO = p.dO + int64_t(head) * p.Nq * D;
    const float* L2 = p.L2 + int64_t(head) * p.stats_rows;
    const float* Drow = p.Drow + int64_t(head) * p.stats_rows;
    float* dq_acc = p.dq_acc + int64_t(head) * p.Nq * D;

    for (int qt = first_q_tile; qt < p.num_q_tiles; ++qt) {
      const int q0 = qt * Br;
      ft::tc::copy_tile_async<QTile, Br, Tr::kThreads>(Qs, Q, q0, p.Nq);
      ft::tc::copy_tile_async<QTile, Br, Tr::kThreads>(dOs, dO, q0, p.Nq);
      ft::tc::cp_async_commit();
      if (threadIdx.x < Br) {  // rows past N_q hold L = −∞ (no probability) and D = 0
        Ls[threadIdx.x] = L2[q0 + threadIdx.x];
        Dsm[threadIdx.x] = Drow[q0 + threadIdx.x];
      }
      ft::tc::cp_async_wait<0>();
      ft::sm90::fence_proxy_async();  // cp.async's writes, before the tensor cores read them
      __syncthreads();

      // Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ (this warpgroup's keys), then P and dS on the registers.
      float st[kS], dpt[kS];
      scores_transposed<Tr>(st, dpt, k_addr, v_addr, q_addr, do_addr);
      probabilities_and_ds(st, dpt, p, key_base, q0, t, Ls, Dsm);
      uint32_t pa[Br / ft::sm90::kMmaK][4], dsa[Br / ft::sm90::kMmaK][4];
      pack_a<T>(pa, st);
      pack_a<T>(dsa, dpt);

      // dV's product; then dSᵀ to shared memory (rows 64·wg on), for dQ, the generic writes
      // fenced for the async proxy that wgmma reads through; then dK's product, which reads
      // the same registers (dsa): stored after its issue, they would be read while an issued
      // wgmma still reads them, which the PTX ISA leaves undefined.
      issue_dv<Tr>(dv, pa, do_addr);
      store_ds<DsTile>(dSs, dsa, wg, t);
      ft::sm90::fence_proxy_async();
      issue_dk<Tr>(dk, dsa, q_addr);
      // The warpgroup's four warps wrote the rows its dQ product reads: they meet first
      // (named barrier 1 + wg, the warpgroup's 128 threads).
      ft::sm90::named_sync(1 + wg, ft::sm90::kWarpgroupThreads);

      // dQ_w = dS_w·K_w: this warpgroup's 64 keys, every query of the tile; A = dS read
      // from dSᵀ transposed, B = K MN-major (k = keys).
      float dq[kO];
      ft::sm90::fence();
#pragma unroll
      for (int kk = 0; kk < ft::sm90::kMmaM / ft::sm90::kMmaK; ++kk)
        ft::sm90::mma_ss<T, D, /*kTransB=*/true, /*kTransA=*/true>(
            dq, ft::sm90::mn_major_descriptor<DsTile>(ds_addr, kk), ft::sm90::mn_major_descriptor<KvTile>(k_addr, kk),
            kk > 0);
      ft::sm90::commit();
      ft::sm90::wait<0>();
      ft::sm90::fence_registers(dq);
      ft::sm90::fence_registers(dk);
      ft::sm90::fence_registers(dv);

#pragma unroll
      for (int i = 0; i < kO; i += 2) {
        const int query = q0 + ft::sm90::acc_row(t, i);
        if (query < p.Nq)
          atomicAdd(reinterpret_cast<float2*>(dq_acc + int64_t(query) * D + ft::sm90::acc_col(t, i)),
                    make_float2(dq[i], dq[i + 1]));
      }
      __syncthreads();  // Q, dO, dSᵀ, L and D are read: the next tile may overwrite them
    }
  }

  ft::tc::cp_async_wait<0>();  // K and V landed even where no query tile needed them
  // dK and dV of this warpgroup's keys, summed over the group's query heads: written once.
  store_dk_dv<Tr>(p, GradStrides{}, kv_head, dk, dv, key_base, t);
}

}  // namespace ch10
