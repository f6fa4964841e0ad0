/// @file specialized_backward.cuh
/// @brief Chapter 10, steps 2 to 11: the backward with its roles split (a producer and two
/// consumers, as chapter 09's forward), dQ computed once a block, two ways of adding it into
/// device memory, and the variations of steps 4 to 7 on that structure.
///
/// Step 1 waited for every copy: each query tile's Q and dO came by cp.async from all 256
/// threads, a block barrier, then the products. Here, as in chapter 09's steps 3 onwards:
///
///     warpgroup 0, producer   one thread: K and V once; then, query tile after query tile,
///                             Q, dO (tensor copies) and the tile's L·log2 e and D (two
///                             bulk copies of 4·Br bytes: prepare_backward lays them out padded
///                             to whole tiles) into stage it % 2 once the consumers have
///                             released it (empty[s]); the copy engine counts the bytes into
///                             full[s]. 24 registers a thread.
///     warpgroups 1, 2,        keys 64c to 64c + 63 of the block's 128 each, 240 registers:
///     consumers c = 0, 1      wait full[s], the five products, each thread arrives on empty[s].
///
/// dQ changes shape. In step 1 each warpgroup multiplied its own 64 keys' dS by its own K
/// rows and added the 64 × d result: two shares a block a query tile, 2·64·d float adds.
/// Here both warpgroups' dSᵀ rows go to shared memory and meet (a named barrier of the 256
/// consumer threads); consumer c then computes dQ's columns c·d/2 on over all 128 keys
///
///     dQ[:, c·d/2 : (c+1)·d/2] = dS · K[:, c·d/2 : (c+1)·d/2]    mma_ss, M = 64 queries,
///                                                                N = d/2, k = 128 keys
///
/// so the block adds one share (64·d floats) a query tile, half step 1's. How it is added
/// is the step:
///
/// Step 2 (`specialized`, DqAdd::kAtomics): each thread's float2 atomics from its
/// registers, as step 1; the consumer waits for none of them, but issues 8 to 16 of them a
/// thread a tile.
///
/// Step 3 (`bulk_dq`, DqAdd::kBulk): the share into shared memory (two buffers, dq_full and
/// dq_empty barriers), and warp 1 of the producer's warpgroup, otherwise idle, hands it to
/// the copy engine a row per `cp.reduce.async.bulk ... .add.f32`: the adds happen in L2
/// while the consumers go on; before a buffer is written again, that warp has waited until
/// the engine has read it (`cp.async.bulk.wait_group.read`) and released it.
///
/// Step 4 (`deterministic`) orders step 3's adds; step 5 (`overlap`) issues the next tile's
/// scores behind this tile's dQ; step 6 (`tall`, `tall_bulk`; d = 64) takes query tiles of
/// 128, twice the products for every wait and meeting, with dQ split by rows:
///
///     dQ[64c : 64c + 64, :] = dS[64c : 64c + 64, :] · K               mma_ss, M = 64 queries,
///                                                                     N = d, k = 128 keys
///
/// Step 7 (`p_under_dp`, Schedule::kPUnderDp) is step 3 with a tile's first products waited
/// for one at a time:
///
///     issue Sᵀ | issue dPᵀ | wait Sᵀ | P, issue dV | wait dPᵀ | dS, store dSᵀ, issue dK | ...
///                           <------ dPᵀ's product runs ------>
///
/// Step 8 (`lean`, Tr::kLean; step 3's structure at d = 128, step 6's at d = 64) spends fewer
/// instructions between the products: a tile that needs_mask clears computes P and dS with no
/// check (tile_probabilities_and_ds), its dQ atomics go out unchecked, dS stays unscaled
/// (the scale multiplies dK at its store and dQ in its conversion), and at d = 128 (kWideShared)
/// L and D are read two columns a load and dSᵀ goes to shared memory by stmatrix, a k-step an
/// instruction. Step 9 (`persistent`) walks key blocks from a counter (for_each_item).
///
/// Step 10 (`tile_dq`, Tr::kDqTiles) is step 9 with dQ's accumulator laid out a query tile at
/// a time in the consumers' register order (dq_tile_offset): each consumer stores its share
/// into the buffer four floats at a time, and the adder hands the copy engine the whole tile
/// with one bulk add, at d = 64 too (step 6's tall_bulk tiles), where step 9 used atomics.
///
/// Step 11 (`dq_turns`, Tr::kDqTurns, d = 128) is step 10 with the consumers taking turns at
/// dQ: tile `it`'s whole dQ is consumer it % 2's (m64n128k16 over the 128 keys), from dSᵀ
/// buffer it % 2, after one meeting the other consumer only arrives at; the other goes on.
#pragma once

#include <cuda/ptx>

#include <cstdint>

#include "10_hopper_backward/backward_tile.cuh"
#include "10_hopper_backward/backward_traits.cuh"
#include "sm90/mbarrier.cuh"
#include "sm90/warp_roles.cuh"
#include "sm90/wgmma.cuh"

namespace ch10 {

/// Named barrier 1: the two consumers' 256 threads (0 is __syncthreads).
constexpr int kConsumersMeet = 1;
/// Step 11: named barriers 2 and 3, turn 0's and turn 1's meeting (the 256 consumer threads:
/// the turn's consumer waits, the other only arrives). Two, so that a consumer that arrives for
/// tile it and runs ahead to tile it + 1, where it waits, never counts into tile it's meeting.
constexpr int kTurnMeet = 2;

/// Which K/V tile a block owns and which query tiles it visits: every query head of its
/// key/value head's group, each from the first query tile that sees the block's first key
/// (causal) to the last. The producer and the consumers walk it alike.
struct BlockWork {
  int kv_head;       ///< b·H_kv + h_kv
  int batch;
  int first_head;    ///< b·H_q + the group's first query head
  int k0;            ///< the block's first key
  int first_q_tile;  ///< causal: earlier query tiles see none of the block's keys
};

template <class Tr>
__device__ __forceinline__ BlockWork block_work(const Params<typename Tr::T>& p, int work) {
  BlockWork w;
  const int kv_tile = work % p.num_kv_tiles;
  w.kv_head = work / p.num_kv_tiles;
  w.batch = w.kv_head / p.heads_kv;
  w.first_head = w.batch * p.heads_q + w.kv_head % p.heads_kv * p.group;
  w.k0 = kv_tile * Tr::Bc;
  // Key k0 is visible to query i iff i >= k0 − offset.
  w.first_q_tile = p.causal ? max(0, w.k0 - p.causal_offset) / Tr::Br : 0;
  return w;
}

/// The roles of a specialized block that walk its key blocks.
enum class Role { kProducer, kAdder, kConsumer };

/// Calls f(w, item) for each key block (work item) this block owns, `item` counting them
/// from 0. Steps 2-8: its own, blockIdx.x, worked out before the roles split (`first`), as
/// straight-line code with no loop for the compiler to carry registers across (worked out
/// inside each role instead, it cost `tall` an 8-byte spill).
///
/// Step 9: blockIdx.x first, then whichever key block comes next in the launch's order when
/// the block asks for one (once its producer has loaded the last query tile of the previous
/// one): the producer counts itself in on `next_work` (an atomic add; key blocks gridDim.x
/// onward go out in that order, as the GPU hands out the blocks of steps 2-8), waits until K
/// and V of the previous item are free (kv_empty), and writes the key block into shared
/// memory (`next`); its arrival on kv_full, with K and V's bytes, tells the others, who read
/// it there. A number past the last key block ends the walk: the
/// producer arrives on kv_full without bytes, and every role leaves. The adder's lanes (kBulk)
/// arrive on kv_empty once each has read its item, so that `next` is not written again before.
template <class Tr, class F>
__device__ __forceinline__ void for_each_item(const Params<typename Tr::T>& p, const BlockWork& first, Role role,
                                              int* next_work, int* next, uint64_t* kv_full, uint64_t* kv_empty,
                                              F&& f) {
  if constexpr (Tr::kPersistent) {
    int work = blockIdx.x;
    for (int item = 0;; ++item) {
      if (role == Role::kProducer) {
        if (item > 0) {
          work = atomicAdd(next_work, 1) + int(gridDim.x);
          ft::sm90::wait(kv_empty, (item - 1) & 1);  // the previous item's K, V and `next` are read
          *next = work;
        }
      } else {
        // Each item's K and V, the first's too. A parity names the phase before the open one
        // as well, which has completed: a role that reached item k+1's wait while phase k
        // was still open (the adder, with nothing to add for a key block no query sees)
        // would pass it at once and read `next` before the producer wrote it.
        ft::sm90::wait(kv_full, item & 1);
        if (item > 0) work = *next;
      }
      if (work >= p.work_items) {
        if (role == Role::kProducer) ft::sm90::arrive(kv_full);
        return;
      }
      if (role == Role::kAdder) ft::sm90::arrive(kv_empty);  // each lane releases its own read
      f(block_work<Tr>(p, work), item);
    }
  } else {
    f(first, 0);
  }
}

/// The producer: one thread. For one key block, K and V (step 9: once the others have done
/// with the previous item's, for_each_item), then every query tile's Q, dO, L·log2 e and D
/// into the ring of stages (`it` counts tiles, across items), each once the consumers have
/// emptied it.
template <class Tr>
__device__ void produce(const Params<typename Tr::T>& p, const BlockWork& w, int& it, typename Tr::T* Ks,
                        typename Tr::T* Qs, float* stats, uint64_t* kv_full, uint64_t* full, uint64_t* empty,
                        const CUtensorMap* map_q, const CUtensorMap* map_k, const CUtensorMap* map_v,
                        const CUtensorMap* map_do) {
  using T = typename Tr::T;
  using QTile = typename Tr::QTile;
  using KvTile = typename Tr::KvTile;
  constexpr int kQElems = QTile::kBytes / sizeof(T), kKvElems = KvTile::kBytes / sizeof(T);
  constexpr uint32_t kStatsBytes = Tr::Br * sizeof(float);  // one tile's L (or D): 256 or 512 aligned bytes
  const int h_kv = w.kv_head % p.heads_kv;
  ft::sm90::arrive_expect_tx(kv_full, 2 * KvTile::kBytes);
  for (int pnl = 0; pnl < KvTile::kPanels; ++pnl) {
    const int col = pnl * ft::sm90::kPanelCols;
    ft::sm90::copy_box(Ks + pnl * KvTile::kPanelElems, map_k, col, w.k0, h_kv, w.batch, kv_full);
    ft::sm90::copy_box(Ks + kKvElems + pnl * KvTile::kPanelElems, map_v, col, w.k0, h_kv, w.batch, kv_full);
  }
  for (int g = 0; g < p.group; ++g) {
    const int head = w.first_head + g, h = head % p.heads_q;  // b·H_q + h, and h
    for (int qt = w.first_q_tile; qt < p.num_q_tiles; ++qt, ++it) {
      const int s = it % Tr::kStages, q0 = qt * Tr::Br;
      if (it >= Tr::kStages) ft::sm90::wait(&empty[s], (it / Tr::kStages - 1) & 1);  // its last use done
      T* q_dst = Qs + s * 2 * kQElems;
      ft::sm90::arrive_expect_tx(&full[s], 2 * QTile::kBytes + 2 * kStatsBytes);
      for (int pnl = 0; pnl < QTile::kPanels; ++pnl) {
        const int col = pnl * ft::sm90::kPanelCols;
        ft::sm90::copy_box(q_dst + pnl * QTile::kPanelElems, map_q, col, q0, h, w.batch, &full[s]);
        ft::sm90::copy_box(q_dst + kQElems + pnl * QTile::kPanelElems, map_do, col, q0, h, w.batch, &full[s]);
      }
      const int64_t row = int64_t(head) * p.stats_rows + q0;  // rows past N_q: L = −∞, D = 0
      ft::sm90::copy_bytes(stats + s * 2 * Tr::Br, p.L2 + row, kStatsBytes, &full[s]);
      ft::sm90::copy_bytes(stats + s * 2 * Tr::Br + Tr::Br, p.Drow + row, kStatsBytes, &full[s]);
    }
  }
}

/// The consumer's dQ share (dq: 64 rows, the tile's queries row0 on; columns col0 on) into
/// the float32 accumulator, as Tr::kDq says; then the consumers meet, so that neither writes
/// the next tile's dSᵀ while the other's dQ product may still read this one's (not step 11,
/// whose next tile's dSᵀ goes to the other buffer). kBulk: into
/// buffer `it` % 2 of dQs once the adder has emptied it (dq_empty), announced on dq_full.
template <class Tr>
__device__ __forceinline__ void add_dq(const Params<typename Tr::T>& p, const float (&dq)[Tr::kDqCols / 2],
                                       float* dq_acc, float* dQs, uint64_t* dq_full, uint64_t* dq_empty, int it,
                                       int q0, int row0, int col0, int t) {
  if constexpr (Tr::kDq == DqAdd::kAtomics) {
    // One address a tile, of this thread's first element; the others lie at constant offsets
    // from it (acc_row(t, i) = acc_row(t, 0) + acc_row(0, i), and so acc_col). Unchecked
    // (step 8's full tiles), the atomics take them as immediates; each behind its own row
    // check, the compiler still computes each address anew, in registers the previous atomic
    // may not have read yet (the case study).
    const int query = q0 + row0 + ft::sm90::acc_row(t, 0);
    float* const at = dq_acc + int64_t(query) * Tr::D + col0 + ft::sm90::acc_col(t, 0);
    auto add = [&](int i) {
      atomicAdd(reinterpret_cast<float2*>(at + ft::sm90::acc_row(0, i) * Tr::D + ft::sm90::acc_col(0, i)),
                make_float2(dq[i], dq[i + 1]));
    };
    if (Tr::kLean && q0 + Tr::Br <= p.Nq) {
      // Step 8: every row of the tile lies before N_q, so no atomic is checked, and none
      // sits in a branch of its own, where the compiler computed its address anew.
#pragma unroll
      for (int i = 0; i < Tr::kDqCols / 2; i += 2) add(i);
    } else {
#pragma unroll
      for (int i = 0; i < Tr::kDqCols / 2; i += 2)
        if (query + ft::sm90::acc_row(0, i) < p.Nq) add(i);
    }
  } else {
    const int b = it % 2;
    if (it >= 2) ft::sm90::wait(&dq_empty[b], (it / 2 - 1) & 1);  // the adds of tile it − 2 have read it
    if constexpr (Tr::kDqTiles) {
      // The tile in the registers' order (dq_tile_offset): four registers a float4.
      float* buf = dQs + b * Tr::Br * Tr::D;
      // Step 11's turn: registers 32 on are the second share's (dq_tile_offset runs on into it).
      const int share = Tr::first_share(row0, col0);
#pragma unroll
      for (int i = 0; i < Tr::kDqCols / 2; i += 4)
        *reinterpret_cast<float4*>(buf + dq_tile_offset(share, t, i)) = make_float4(dq[i], dq[i + 1], dq[i + 2], dq[i + 3]);
    } else {
      float* buf = dQs + b * Tr::Br * Tr::kDqRowFloats;
#pragma unroll
      for (int i = 0; i < Tr::kDqCols / 2; i += 2)
        *reinterpret_cast<float2*>(buf + (row0 + ft::sm90::acc_row(t, i)) * Tr::kDqRowFloats + col0 +
                                   ft::sm90::acc_col(t, i)) = make_float2(dq[i], dq[i + 1]);
    }
    ft::sm90::fence_proxy_async();  // the generic writes, before the copy engine reads them
    __syncwarp();
    if (t % 32 == 0) ft::sm90::arrive(&dq_full[b]);
  }
  // Step 11 has no second meeting: the next tile's dSᵀ goes to the other buffer (kDsBuffers).
  if constexpr (!Tr::kDqTurns) ft::sm90::named_sync(kConsumersMeet, Tr::kConsumerThreads);
}

/// A consumer's dSᵀ rows into shared memory for dQ, fenced for the async proxy that wgmma
/// reads through. Called between dV's issue and dK's (issue_dv, issue_dk): dK reads the
/// same registers (dsa) as its A operand, and the PTX ISA leaves reading a register an
/// issued wgmma still reads, before the wait that covers it, undefined.
template <class DsTile, bool kStmatrix = false, class T, int kSteps>
__device__ __forceinline__ void share_ds(T* dSs, const uint32_t (&dsa)[kSteps][4], int c, int t) {
  if constexpr (kStmatrix)
    store_ds_stmatrix<DsTile>(dSs, dsa, c, t);  // step 8 at d = 128
  else
    store_ds<DsTile>(dSs, dsa, c, t);
  ft::sm90::fence_proxy_async();
}

/// The consumers' meeting once both have written their dSᵀ rows (share_ds: neither reads
/// dSᵀ before both have), and dQ's product issued, not waited for: this consumer's 64 rows
/// and kDqCols columns of dQ = dS·K over the block's 128 keys. A = dS read from dSᵀ
/// transposed (ds_addr: the 64-query panel of its rows), B = K's columns col0 on
/// (k_cols_addr), MN-major (k = keys).
template <class Tr, class DsTile, class KvTile>
__device__ __forceinline__ void meet_issue_dq(float (&dq)[Tr::kDqCols / 2], uint32_t ds_addr, uint32_t k_cols_addr,
                                              int meeting = kConsumersMeet) {
  const uint64_t ds = ft::sm90::mn_major_descriptor<DsTile>(ds_addr, 0);
  const uint64_t k = ft::sm90::mn_major_descriptor<KvTile>(k_cols_addr, 0);
  ft::sm90::named_sync(meeting, Tr::kConsumerThreads);
  ft::sm90::fence();
#pragma unroll
  for (int kk = 0; kk < Tr::Bc / ft::sm90::kMmaK; ++kk)
    ft::sm90::mma_ss<typename Tr::T, Tr::kDqCols, /*kTransB=*/true, /*kTransA=*/true>(
        dq, ft::sm90::advance(ds, ft::sm90::mn_major_offset(kk)), ft::sm90::advance(k, ft::sm90::mn_major_offset(kk)),
        kk > 0);
  ft::sm90::commit();
}

/// A counter of the deterministic adds, read with acquire and counted with release
/// semantics across the GPU: what one block's adder did before it counts itself in is
/// visible to the block that sees the new count.
__device__ __forceinline__ int load_acquire(const int* counter) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(v) : "l"(counter) : "memory");
  return v;
}
__device__ __forceinline__ void add_release(int* counter, int v) {
  asm volatile("red.release.gpu.global.add.s32 [%0], %1;\n" ::"l"(counter), "r"(v) : "memory");
}

/// kBulk's adder: warp 1 of warpgroup 0. Tile after tile (the consumers' order), once both
/// consumers have written its share (dq_full), hands it to the copy engine a row per
/// `cp.reduce.async.bulk ... .add.f32` (Br/32 rows a lane, rows past N_q left out), waits
/// until the engine has read the buffer, and gives it back (dq_empty).
///
/// Deterministic (step 4): before its adds into query tile qt of a head, the adder waits until
/// that tile's counter says every earlier key block of the head has added (the counter
/// equals this block's key tile), waits for its own adds to be performed, and then counts
/// itself in. Key tile 0 visits every query tile any key tile visits (under the causal mask
/// a tile's visitors are key tiles 0 to some k), so the order is 0, 1, 2, ... for every tile.
template <class Tr>
__device__ void add_dq_rows(const Params<typename Tr::T>& p, const BlockWork& w, int& it, const float* dQs,
                            uint64_t* dq_full, uint64_t* dq_empty, int* dq_turn) {
  const int lane = threadIdx.x % 32;
  const int kv_tile = w.k0 / Tr::Bc;
  for (int g = 0; g < p.group; ++g) {
    // Rows of the accumulator a head: N_q, or (kDqTiles) whole tiles, stats_rows.
    float* dq_acc = p.dq_acc + int64_t(w.first_head + g) * (Tr::kDqTiles ? p.stats_rows : p.Nq) * Tr::D;
    for (int qt = w.first_q_tile; qt < p.num_q_tiles; ++qt, ++it) {
      const int b = it % 2, q0 = qt * Tr::Br;
      int* turn = dq_turn + int64_t(w.first_head + g) * p.num_q_tiles + qt;
      ft::sm90::wait(&dq_full[b], (it / 2) & 1);
      if constexpr (Tr::kDeterministic) {
        if (lane == 0)
          while (load_acquire(turn) != kv_tile) __nanosleep(64);
        __syncwarp();
        cuda::ptx::fence_proxy_async(cuda::ptx::space_global);  // the earlier blocks' adds, before ours
      }
      if constexpr (Tr::kDqTiles) {
        // The whole tile, one add (its rows past N_q too: zeros, never converted).
        if (lane == 0)
          cuda::ptx::cp_reduce_async_bulk(cuda::ptx::space_global, cuda::ptx::space_shared, cuda::ptx::op_add,
                                          dq_acc + int64_t(q0) * Tr::D, dQs + b * Tr::Br * Tr::D,
                                          uint32_t(Tr::Br * Tr::D * sizeof(float)));
      } else {
        for (int r = lane; r < Tr::Br && q0 + r < p.Nq; r += 32)
          cuda::ptx::cp_reduce_async_bulk(cuda::ptx::space_global, cuda::ptx::space_shared, cuda::ptx::op_add,
                                          dq_acc + int64_t(q0 + r) * Tr::D, dQs + (b * Tr::Br + r) * Tr::kDqRowFloats,
                                          uint32_t(Tr::D * sizeof(float)));
      }
      cuda::ptx::cp_async_bulk_commit_group();
      if constexpr (Tr::kDeterministic) {
        cuda::ptx::cp_async_bulk_wait_group(cuda::ptx::n32_t<0>{});  // our adds performed, not only read
        cuda::ptx::fence_proxy_async(cuda::ptx::space_global);
        __syncwarp();
        if (lane == 0) add_release(turn, 1);
      } else {
        cuda::ptx::cp_async_bulk_wait_group_read(cuda::ptx::n32_t<0>{});
      }
      __syncwarp();
      if (lane == 0) ft::sm90::arrive(&dq_empty[b]);
    }
  }
}

template <class Tr>
__global__ void __launch_bounds__(Tr::kThreads, 1)
    specialized_backward(const Params<typename Tr::T> p, const GradStrides gs, int* dq_turn, int* next_work,
                         const __grid_constant__ CUtensorMap map_q,
                         const __grid_constant__ CUtensorMap map_k, const __grid_constant__ CUtensorMap map_v,
                         const __grid_constant__ CUtensorMap map_do) {
  using T = typename Tr::T;
  using KvTile = typename Tr::KvTile;
  using QTile = typename Tr::QTile;
  using DsTile = typename Tr::DsTile;
  constexpr int D = Tr::D, Br = Tr::Br;
  constexpr int kS = Br / 2;  // Sᵀ's (and dPᵀ's) registers a thread: 64 keys × Br queries
  constexpr int kO = D / 2;   // dK's and dV's: 64 keys × d
  constexpr int kQElems = QTile::kBytes / sizeof(T);

  // Shared memory: K, V, the stages' (Q, dO), dSᵀ — tiles on 1024-byte boundaries — then the
  // stages' L and D, the dQ buffers, the barriers.
  extern __shared__ uint8_t smem_raw[];
  T* const Ks = reinterpret_cast<T*>(ft::sm90::align_shared(smem_raw));
  T* const Qs = Ks + 2 * KvTile::kBytes / sizeof(T);  // stage s: Q at Qs + 2s·kQElems, dO after it
  T* const dSs = Qs + Tr::kStages * 2 * kQElems;  // step 11: turn u's at dSs + u·kDsElems
  constexpr int kDsElems = DsTile::kBytes / sizeof(T);
  float* const stats = reinterpret_cast<float*>(dSs + Tr::kDsBuffers * kDsElems);  // stage s: L, then D
  float* const dQs = stats + Tr::kStages * 2 * Br;
  uint64_t* const kv_full = reinterpret_cast<uint64_t*>(reinterpret_cast<uint8_t*>(dQs) + Tr::kDqBytes);
  uint64_t* const kv_empty = kv_full + 1;      // step 9: K, V and `next` read (each reader arrives)
  uint64_t* const full = kv_full + 2;          // a stage has landed: one arrival + its bytes
  uint64_t* const empty = full + Tr::kStages;  // a stage is free again: one arrival a consumer thread
  uint64_t* const dq_full = empty + Tr::kStages;  // kBulk: a dQ buffer is written, one arrival a consumer warp
  uint64_t* const dq_empty = dq_full + 2;         // kBulk: a dQ buffer is read by the copy engine
  int* const next = reinterpret_cast<int*>(dq_empty + 2);  // step 9: the key block handed out next

  const int wg = ft::sm90::warpgroup_index();  // 0: producer; 1, 2: consumers
  const BlockWork first = block_work<Tr>(p, blockIdx.x);  // the block's own key block

  if (threadIdx.x == 0) {
    ft::sm90::barrier_init(kv_full, 1);
    // Step 9: K, V and `next` read: every consumer thread, and every lane of the adder (kBulk).
    if constexpr (Tr::kPersistent)
      ft::sm90::barrier_init(kv_empty, Tr::kConsumerThreads + (Tr::kDq == DqAdd::kBulk ? 32 : 0));
    for (int s = 0; s < Tr::kStages; ++s) {
      ft::sm90::barrier_init(&full[s], 1);
      ft::sm90::barrier_init(&empty[s], Tr::kConsumerThreads);
    }
    for (int b = 0; b < 2; ++b) {
      // Every consumer warp writes its part of the buffer; step 11: the turn's four warps, the whole.
      ft::sm90::barrier_init(&dq_full[b], Tr::kDqTurns ? Tr::kConsumerWarps / Tr::kConsumers : Tr::kConsumerWarps);
      ft::sm90::barrier_init(&dq_empty[b], 1);
    }
  }
  __syncthreads();  // the last barrier over the whole block: the roles split here

  // Every role walks the same key blocks (for_each_item): `item` counts them (K and V's
  // barrier phases), `it` the query tiles across them (the stages' and dQ buffers' phases).
  if (wg == 0) {
    ft::sm90::release_registers<Tr::kProducerRegs>();
    const bool producer = threadIdx.x == 0, adder = Tr::kDq == DqAdd::kBulk && threadIdx.x / 32 == 1;
    if (!producer && !adder) return;
    int it = 0;
    const Role role = producer ? Role::kProducer : Role::kAdder;
    for_each_item<Tr>(p, first, role, next_work, next, kv_full, kv_empty, [&](const BlockWork& w, int) {
      if (producer)
        produce<Tr>(p, w, it, Ks, Qs, stats, kv_full, full, empty, &map_q, &map_k, &map_v, &map_do);
      else if constexpr (Tr::kDq == DqAdd::kBulk)
        add_dq_rows<Tr>(p, w, it, dQs, dq_full, dq_empty, dq_turn);
    });
    if (adder) cuda::ptx::cp_async_bulk_wait_group(cuda::ptx::n32_t<0>{});  // the adds done before the block ends
    return;
  }
  ft::sm90::claim_registers<Tr::kConsumerRegs>();

  const int c = wg - 1;                                     // this consumer: keys 64·c on
  const int t = threadIdx.x % ft::sm90::kWarpgroupThreads;  // thread within it
  // Its part of dQ: columns c·d/2 on of all the tile's queries, or (step 6's 128-query
  // tiles) all columns of queries 64c on.
  const int dq_row0 = Tr::dq_row0(c), col0 = Tr::dq_col0(c);
  const uint32_t ks_addr = uint32_t(__cvta_generic_to_shared(Ks));
  const uint32_t k_addr = ks_addr + c * ft::sm90::kMmaM * ft::sm90::kSwizzleBytes;  // its 64 rows of K
  const uint32_t v_addr = k_addr + uint32_t(KvTile::kBytes);
  // K's columns col0 on, all 128 rows: B of its dQ product (a panel at d = 128; half of one,
  // 64 bytes into each swizzled row, at d = 64; the whole of K at step 6's d = 64).
  const uint32_t k_cols_addr = ks_addr + uint32_t(col0 / ft::sm90::kPanelCols * KvTile::kPanelBytes +
                                                  col0 % ft::sm90::kPanelCols * int(sizeof(T)));
  // dS's rows dq_row0 on, read transposed from dSᵀ: the panel of those 64 queries.
  const uint32_t ds_addr =
      uint32_t(__cvta_generic_to_shared(dSs)) + uint32_t(dq_row0 / ft::sm90::kPanelCols * DsTile::kPanelBytes);

  int it = 0;
  for_each_item<Tr>(p, first, Role::kConsumer, next_work, next, kv_full, kv_empty, [&](const BlockWork& w, int item) {
    const int key_base = w.k0 + c * ft::sm90::kMmaM;
    float dk[kO], dv[kO];
#pragma unroll
    for (int i = 0; i < kO; ++i) dk[i] = dv[i] = 0.f;
    ft::sm90::wait(kv_full, item & 1);  // K and V (step 9 waited already, in for_each_item)

    if constexpr (!Tr::kOverlap) {
      for (int g = 0; g < p.group; ++g) {
        float* dq_acc = p.dq_acc + int64_t(w.first_head + g) * p.Nq * D;
        for (int qt = w.first_q_tile; qt < p.num_q_tiles; ++qt, ++it) {
          const int s = it % Tr::kStages, q0 = qt * Br;
          const uint32_t q_addr = uint32_t(__cvta_generic_to_shared(Qs + s * 2 * kQElems));
          const uint32_t do_addr = q_addr + uint32_t(QTile::kBytes);
          const float* Ls = stats + s * 2 * Br;
          ft::sm90::wait(&full[s], (it / Tr::kStages) & 1);

          float st[kS], dpt[kS];
          uint32_t pa[Br / ft::sm90::kMmaK][4], dsa[Br / ft::sm90::kMmaK][4];
          if constexpr (Tr::kSchedule == Schedule::kPUnderDp) {
            // Step 7: Sᵀ and dPᵀ as two groups. Once Sᵀ's is done, P is computed and dV's
            // product issued while dPᵀ's still runs; then dS, once dPᵀ's is done.
            issue_scores_transposed<Tr, /*kTwoGroups=*/true>(st, dpt, k_addr, v_addr, q_addr, do_addr);
            ft::sm90::wait<1>();  // Sᵀ's group; dPᵀ's may still run
            ft::sm90::fence_registers(st);
            probabilities(st, p, key_base, q0, t, Ls);
            pack_a<T>(pa, st);
            issue_dv<Tr>(dv, pa, do_addr);
            ft::sm90::commit();
            ft::sm90::wait<1>();  // dPᵀ's group; dV's may still run
            ft::sm90::fence_registers(dpt);
            score_gradients(st, dpt, p, t, Ls + Br);
            pack_a<T>(dsa, dpt);
          } else {
            // Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ (this warpgroup's keys), then P and dS on the registers.
            scores_transposed<Tr>(st, dpt, k_addr, v_addr, q_addr, do_addr);
            tile_probabilities_and_ds<Tr>(st, dpt, p, key_base, q0, t, Ls, Ls + Br);
            pack_a<T>(pa, st);
            pack_a<T>(dsa, dpt);
            issue_dv<Tr>(dv, pa, do_addr);
          }
          if constexpr (Tr::kDqTurns) {
            // Step 11: this tile's dQ is consumer `turn`'s, from dSᵀ buffer `turn`.
            // dV's and dK's products are waited for before the turn's branch: no product is in
            // flight across it (ptxas spilled 1.5 KB a thread where dQ's was issued inside it).
            const int turn = it % 2;
            share_ds<DsTile, Tr::kWideShared>(dSs + turn * kDsElems, dsa, c, t);
            if (c != turn) ft::sm90::named_arrive(kTurnMeet + turn, Tr::kConsumerThreads);  // its dSᵀ rows are in
            issue_dk<Tr>(dk, dsa, q_addr);
            ft::sm90::wait<0>();
            ft::sm90::fence_registers(dk);
            ft::sm90::fence_registers(dv);
            ft::sm90::fence_proxy_async();  // as below: each reader of L and D releases its own reads
            ft::sm90::arrive(&empty[s]);
            if (c == turn) {
              float dq[Tr::kDqCols / 2];
              meet_issue_dq<Tr, DsTile, KvTile>(dq, ds_addr + turn * DsTile::kBytes, k_cols_addr, kTurnMeet + turn);
              ft::sm90::wait<0>();
              ft::sm90::fence_registers(dq);
              add_dq<Tr>(p, dq, dq_acc, dQs, dq_full, dq_empty, it, q0, dq_row0, col0, t);
            }
            continue;
          }
          share_ds<DsTile, Tr::kWideShared>(dSs, dsa, c, t);
          issue_dk<Tr>(dk, dsa, q_addr);

          float dq[Tr::kDqCols / 2];
          meet_issue_dq<Tr, DsTile, KvTile>(dq, ds_addr, k_cols_addr);
          ft::sm90::wait<0>();
          ft::sm90::fence_registers(dq);
          ft::sm90::fence_registers(dk);
          ft::sm90::fence_registers(dv);

          // Q, dO, L and D of this stage are read: every consumer thread's arrival frees it for
          // the producer. L and D were read by ordinary loads, each thread its own, and the copy
          // engine will write the stage again: each reader orders its own reads before the
          // async proxy's next writes (the fence) and releases them itself (its arrival), so
          // that no read reaches the producer only through another thread's arrival.
          ft::sm90::fence_proxy_async();
          ft::sm90::arrive(&empty[s]);
          add_dq<Tr>(p, dq, dq_acc, dQs, dq_full, dq_empty, it, q0, dq_row0, col0, t);
        }
      }

    } else {
      // Step 5 (kOverlap): tile it + 1's Sᵀ and dPᵀ are issued right after tile it's dQ, so
      // that they run on the tensor cores while this consumer waits for dQ, adds it and meets
      // the other; only then does it wait for them. The tiles are walked as one sequence (it:
      // head g = it / per_head, query tile first_q_tile + it % per_head), counted from 0: a
      // block walks one item here (the traits refuse step 9's walk).
      const int per_head = p.num_q_tiles - w.first_q_tile;
      const int total = per_head > 0 ? p.group * per_head : 0;
      auto stage_addr = [&](int i) { return uint32_t(__cvta_generic_to_shared(Qs + i % Tr::kStages * 2 * kQElems)); };
      float st[kS], dpt[kS];
      if (total > 0) {
        ft::sm90::wait(&full[0], 0);
        issue_scores_transposed<Tr>(st, dpt, k_addr, v_addr, stage_addr(0), stage_addr(0) + uint32_t(QTile::kBytes));
      }
      for (int it = 0; it < total; ++it) {
        const int g = it / per_head, qt = w.first_q_tile + it % per_head;
        const int s = it % Tr::kStages, q0 = qt * Br;
        float* dq_acc = p.dq_acc + int64_t(w.first_head + g) * p.Nq * D;
        const uint32_t q_addr = stage_addr(it), do_addr = q_addr + uint32_t(QTile::kBytes);
        const float* Ls = stats + s * 2 * Br;
        ft::sm90::wait<0>();  // tile it's Sᵀ and dPᵀ (issued one tile ahead)
        ft::sm90::fence_registers(st);
        ft::sm90::fence_registers(dpt);

        // Pᵀ and dSᵀ into registers of their own: st and dpt stay the scores' accumulators
        // (written by ordinary instructions, they would make ptxas serialize the next issue).
        float pt[kS], dst[kS];
        probabilities_and_ds(st, dpt, pt, dst, p, key_base, q0, t, Ls, Ls + Br);
        uint32_t pa[Br / ft::sm90::kMmaK][4], dsa[Br / ft::sm90::kMmaK][4];
        pack_a<T>(pa, pt);
        pack_a<T>(dsa, dst);
        issue_dv<Tr>(dv, pa, do_addr);
        share_ds<DsTile>(dSs, dsa, c, t);
        issue_dk<Tr>(dk, dsa, q_addr);
        float dq[Tr::kDqCols / 2];
        meet_issue_dq<Tr, DsTile, KvTile>(dq, ds_addr, k_cols_addr);
        // The next tile's scores, behind dQ: its stage is the other one, filled by the producer.
        const bool next = it + 1 < total;
        if (next) {
          ft::sm90::wait(&full[(it + 1) % Tr::kStages], ((it + 1) / Tr::kStages) & 1);
          issue_scores_transposed<Tr>(st, dpt, k_addr, v_addr, stage_addr(it + 1),
                                      stage_addr(it + 1) + uint32_t(QTile::kBytes));
          ft::sm90::wait<1>();  // dV, dK and dQ of tile it; the next scores may still run
        } else {
          ft::sm90::wait<0>();
        }
        ft::sm90::fence_registers(dq);
        ft::sm90::fence_registers(dk);
        ft::sm90::fence_registers(dv);

        ft::sm90::fence_proxy_async();  // the stage's L and D were read by ordinary loads
        ft::sm90::arrive(&empty[s]);     // each reader releases its own reads, as above
        add_dq<Tr>(p, dq, dq_acc, dQs, dq_full, dq_empty, it, q0, dq_row0, col0, t);
      }
    }

    // K and V are read (every product that reads them has been waited for): the producer may
    // load the next item's while dK and dV of this consumer's keys, summed over the group's
    // query heads, are written once.
    if constexpr (Tr::kPersistent) ft::sm90::arrive(kv_empty);
    store_dk_dv<Tr>(p, gs, w.kv_head, dk, dv, key_base, t);
  });
}

}  // namespace ch10
