/// @file specialized_forward.cuh
/// @brief Chapter 09, steps 3 to 7: warp specialization, ping-pong, intra-warpgroup overlap,
/// a persistent grid, three consumers.
///
/// Step 3 (`warp_specialized`, Schedule::kFree). In step 2 every warp did everything: one
/// thread issued the next tile's copies between products, and a block barrier ended every
/// tile so that a stage could be refilled. Here the roles split (FlashAttention-3's
/// structure):
///
///     warpgroup 0, producer   one thread: Q, then K/V tile j into stage j % kStages once the
///                             consumers have released it (empty[s]); the copy engine
///                             counts the bytes into full[s]. Its 128 threads keep 24
///                             registers each (setmaxnreg), the rest go to the consumers.
///     warpgroups 1, 2,        64 query rows each, 240 registers a thread: wait full[s], the
///     consumers               products and the softmax, then each warp arrives on empty[s].
///
/// No block barrier after the start: a stage is handed back and forth by its two mbarriers,
/// and the producer runs up to kStages tiles ahead. Each consumer's loop issues, per turn,
/// O += P_{j−1}·V_{j−1} and S_j = Q·K_jᵀ together, waits, then computes the softmax of
/// tile j: the tensor cores get two products at once, and whichever consumer is in its
/// softmax leaves them to the other — when the warp schedulers happen to interleave so.
///
/// Step 4 (`pingpong`, Schedule::kPingPong). The interleaving made certain: the two
/// consumers take turns at issuing their products, through two named barriers
/// (sm90/warp_roles.cuh). Consumer 0 waits on barrier kTurn, issues, arrives on kTurn + 1;
/// consumer 1 the other way round; consumer 1 arrives once at the start, so consumer 0
/// goes first. While one consumer's products run, the other computes its softmax.
///
/// Step 5 (`overlap`, Schedule::kOverlap). Within one consumer, the softmax still waited for
/// both products of its turn. Now a turn issues S_{j+1} = Q·K_{j+1}ᵀ and O += P_j·V_j as two
/// groups; the consumer waits for the first only (wait<1>) and computes tile j + 1's
/// softmax while P_j·V_j runs; only O's rescale by tile j + 1's alpha waits for it. The
/// price: P_j's registers and S_{j+1}'s live at once (32 + 64 more a thread).
///
/// Step 6 (`persistent`, kPersistent). A block an SM, each walking query tiles (TileOrder:
/// pairs of tiles of one head, the i-th from its end with the i-th from its start, so that
/// the causal mask gives every pair the same work). The producer copies a tile's first K/V
/// tiles as soon as the last tile's products free their stages, and its Q once the
/// consumers release the last Q (q_empty): the next tile's copies run under this one's end.
///
/// Step 7 (`wide`, `wide_persistent`, kConsumers = 3, d = 64 only). Three consumers, 192
/// query rows a block, the turns a ring of three named barriers; 160 registers a consumer.
///
/// Everything else is step 2's: the tiles by TMA, the arithmetic of forward_tile.cuh, every
/// problem the contract allows (two lengths, grouped heads, both causal alignments, views).
#pragma once

#include <cstdint>

#include "09_hopper_forward/forward_tile.cuh"
#include "09_hopper_forward/forward_traits.cuh"
#include "sm90/mbarrier.cuh"
#include "sm90/warp_roles.cuh"

namespace ch09 {

/// Named barriers 1, 2 (and 3) (0 is __syncthreads): consumer c's turn is kTurn + c; the
/// turns go round the consumers, each handing them to the next.
constexpr int kTurn = 1;

/// One query tile of the problem: which rows, which heads, how many K/V tiles it reads.
struct Work {
  int q0;              ///< first query row
  int head;            ///< b·H_q + h (tiles fit an int: the launch checks)
  int kv_head;         ///< b·H_kv + h / group
  int num_kv_tiles;    ///< K/V tiles it reads (causal: up to its diagonal; 0: it sees no key)
};

/// Query tile `q_tile` of grid head `head` (b·H_q + h).
template <class Tr>
__device__ __forceinline__ Work work_of(const Params<typename Tr::T>& p, int q_tile, int head) {
  Work w;
  w.q0 = q_tile * Tr::Br;
  w.head = head;
  w.kv_head = head / p.group;
  const int kv_end = p.causal ? min(p.Nk, w.q0 + Tr::Br + p.causal_offset) : p.Nk;
  w.num_kv_tiles = kv_end <= 0 ? 0 : (kv_end + Tr::Bc - 1) / Tr::Bc;
  return w;
}

/// Query-tile pairs of a head of `num_q_tiles` tiles (TileOrder's unit of work; the middle
/// tile of an odd count is a pair alone). The launch sizes the persistent grid by it.
FT_HOST_DEVICE inline int pairs_per_head(int num_q_tiles) { return (num_q_tiles + 1) / 2; }

/// The query tiles one block computes, in order; the producer and the consumers each walk
/// the same sequence, so nothing about it needs saying between them.
///
/// A block a tile (steps 3-5): tile blockIdx.x only, heads in turn and within a head the
/// last query tile first (under the causal mask it has the most K/V tiles: chapter 04).
///
/// Persistent (step 6): a block an SM, walking pairs of query tiles round-robin (pair
/// blockIdx.x, + gridDim.x, ...). A pair is the i-th tile from a head's end and the i-th
/// from its start, so that under the causal mask every pair reads the same number of K/V
/// tiles (n + 1 of a head's n, give or take the ragged edge) and a fixed hand-out keeps the
/// SMs evenly loaded; the consecutive pairs that run at once share heads, and so K and V in
/// L2. With an odd number of tiles the middle one has no partner.
template <class Tr>
struct TileOrder {
  const Params<typename Tr::T>& p;
  int pair;        ///< persistent: the current pair; otherwise the block's tile
  int member = 0;  ///< persistent: 0, the pair's tile near the end; 1, near the start

  __device__ explicit TileOrder(const Params<typename Tr::T>& params) : p(params), pair(blockIdx.x) {}

  /// The next tile into `w`; false when the block has none left.
  __device__ __forceinline__ bool next(Work& w) {
    const int nq = p.num_q_tiles;
    if constexpr (!Tr::kPersistent) {
      if (member++ > 0) return false;
      w = work_of<Tr>(p, nq - 1 - pair % nq, pair / nq);
      return true;
    } else {
      const int per_head = pairs_per_head(nq);
      while (pair < p.num_tiles / nq * per_head) {
        const int i = pair % per_head;
        const int q_tile = member == 0 ? nq - 1 - i : i;
        const int head = pair / per_head;
        if (member == 0) {
          member = 1;
        } else {
          member = 0;
          pair += gridDim.x;
          if (q_tile == nq - 1 - q_tile) continue;  // the middle tile: done as member 0
        }
        w = work_of<Tr>(p, q_tile, head);
        return true;
      }
      return false;
    }
  }
};

/// The producer: one thread, every copy of the block, tile after tile. A query tile's Q on
/// q_full once the consumers have released the last one (q_empty); its K/V tiles through
/// the ring of stages, counted across query tiles (`it`: stage it % kStages, that stage's
/// use it / kStages), each once the consumers have emptied its stage.
template <class Tr>
__device__ void produce(const Params<typename Tr::T>& p, const ft::ViewArgs& v, typename Tr::T* Qs,
                        typename Tr::T* Ks, uint64_t* q_full, uint64_t* q_empty, uint64_t* full, uint64_t* empty,
                        const CUtensorMap* map_q, const CUtensorMap* map_k, const CUtensorMap* map_v) {
  using QTile = typename Tr::QTile;
  using KvTile = typename Tr::KvTile;
  constexpr int kKvElems = KvTile::kBytes / sizeof(typename Tr::T);
  int it = 0;
  TileOrder<Tr> order(p);
  Work w;
  for (int q_use = 0; order.next(w); ++q_use) {
    auto load_q = [&] {
      if (q_use > 0) ft::sm90::wait(q_empty, (q_use - 1) & 1);  // the last tile's Q is read
      ft::sm90::arrive_expect_tx(q_full, QTile::kBytes);
      for (int pnl = 0; pnl < QTile::kPanels; ++pnl)
        ft::sm90::copy_box(Qs + pnl * QTile::kPanelElems, map_q, pnl * ft::sm90::kPanelCols, w.q0,
                           w.head % v.heads, w.head / v.heads, q_full);
    };
    // The first kStages K/V tiles need only free stages, which the last tile's final
    // products release: they are copied before Q, which must wait until every product of
    // the last tile is done. Q then comes before any tile that would wait on this one.
    const int early = min(w.num_kv_tiles, Tr::kStages);
    if (early == 0) load_q();
    const int k_head = w.kv_head % v.heads_kv, k_batch = w.kv_head / v.heads_kv;
    for (int j = 0; j < w.num_kv_tiles; ++j, ++it) {
      if (j == early) load_q();
      const int s = it % Tr::kStages;
      if (it >= Tr::kStages) ft::sm90::wait(&empty[s], (it / Tr::kStages - 1) & 1);  // its last use done
      typename Tr::T* k_dst = Ks + s * 2 * kKvElems;
      ft::sm90::arrive_expect_tx(&full[s], 2 * KvTile::kBytes);
      for (int pnl = 0; pnl < KvTile::kPanels; ++pnl) {
        const int col = pnl * ft::sm90::kPanelCols;
        ft::sm90::copy_box(k_dst + pnl * KvTile::kPanelElems, map_k, col, j * Tr::Bc, k_head, k_batch, &full[s]);
        ft::sm90::copy_box(k_dst + kKvElems + pnl * KvTile::kPanelElems, map_v, col, j * Tr::Bc, k_head, k_batch,
                           &full[s]);
      }
    }
    if (early > 0 && early == w.num_kv_tiles) load_q();  // every K/V tile went early
  }
}

template <class Tr>
__global__ void __launch_bounds__(Tr::kThreads, 1)
    specialized_forward(const Params<typename Tr::T> p, const ft::ViewArgs v, const __grid_constant__ CUtensorMap map_q,
                        const __grid_constant__ CUtensorMap map_k, const __grid_constant__ CUtensorMap map_v) {
  using T = typename Tr::T;
  constexpr int Bc = Tr::Bc, kS = Bc / 2, kO = Tr::D / 2;
  using KvTile = typename Tr::KvTile;
  constexpr int kKvElems = KvTile::kBytes / sizeof(T);
  constexpr bool kPingPong = Tr::kSchedule != Schedule::kFree;

  // Shared memory: Q, kStages × (K, V), each on a 1024-byte boundary; then the barriers.
  extern __shared__ uint8_t smem_raw[];
  const uintptr_t base = (reinterpret_cast<uintptr_t>(smem_raw) + ft::sm90::kAtomBytes - 1) /
                         ft::sm90::kAtomBytes * ft::sm90::kAtomBytes;
  T* const Qs = reinterpret_cast<T*>(base);
  T* const Ks = Qs + Tr::QTile::kBytes / sizeof(T);
  uint64_t* const q_full = reinterpret_cast<uint64_t*>(Ks + Tr::kStages * 2 * kKvElems);
  uint64_t* const q_empty = q_full + 1;         // Q is read: one arrival a consumer warp
  uint64_t* const full = q_empty + 1;           // a stage's tile has landed: one arrival + its bytes
  uint64_t* const empty = full + Tr::kStages;   // a stage is free again: one arrival a consumer warp

  const int wg = threadIdx.x / ft::sm90::kWarpgroupThreads;  // 0: producer; 1, 2: consumers

  if (threadIdx.x == 0) {
    ft::sm90::barrier_init(q_full, 1);
    ft::sm90::barrier_init(q_empty, Tr::kConsumerWarps);
    for (int s = 0; s < Tr::kStages; ++s) {
      ft::sm90::barrier_init(&full[s], 1);
      ft::sm90::barrier_init(&empty[s], Tr::kConsumerWarps);
    }
  }
  __syncthreads();  // the last barrier over the whole block: the roles split here

  if (wg == 0) {
    ft::sm90::release_registers<Tr::kProducerRegs>();
    if (threadIdx.x == 0) produce<Tr>(p, v, Qs, Ks, q_full, q_empty, full, empty, &map_q, &map_k, &map_v);
    return;
  }
  ft::sm90::claim_registers<Tr::kConsumerRegs>();

  const int c = wg - 1;                                     // this consumer: rows 64·c on
  const int t = threadIdx.x % ft::sm90::kWarpgroupThreads;  // thread within it
  const uint32_t q_addr = uint32_t(__cvta_generic_to_shared(Qs)) + c * ft::sm90::kMmaM * ft::sm90::kSwizzleBytes;
  constexpr int kTurnThreads = 2 * ft::sm90::kWarpgroupThreads;  // one consumer waits, the one before arrives
  const int next = (c + 1) % Tr::kConsumers;                       // who takes the tensor cores after c
  const bool last_consumer = c == Tr::kConsumers - 1;

  float o[kO];
  ft::OnlineSoftmax row[2];
  float s[kS];
  uint32_t pa[Bc / ft::sm90::kMmaK][4];

  int it = 0;  // K/V tiles consumed by this block so far, across query tiles (as the producer counts)
  int row0 = 0;
  // Tile j of the current query tile: stage (it + j) % kStages, that stage's use (it + j) / kStages.
  auto k_addr = [&](int j) { return uint32_t(__cvta_generic_to_shared(Ks + (it + j) % Tr::kStages * 2 * kKvElems)); };
  auto v_addr = [&](int j) { return k_addr(j) + uint32_t(KvTile::kBytes); };
  // A turn at the tensor cores: issue this consumer's products as one group, hand the
  // tensor cores to the other consumer (ping-pong), wait for the products.
  auto turn = [&](bool last, auto&& issue) {
    if (kPingPong) ft::sm90::named_sync(kTurn + c, kTurnThreads);  // the other consumer has issued
    ft::sm90::fence();
    issue();
    ft::sm90::commit();
    // The last consumer's last turn has no one left to hand the tensor cores to.
    if (kPingPong && !(last_consumer && last)) ft::sm90::named_arrive(kTurn + next, kTurnThreads);
    ft::sm90::wait<0>();
    ft::sm90::fence_registers(o);
    ft::sm90::fence_registers(s);
  };
  // The softmax of tile j, whose S the last turn computed: P into pa.
  auto softmax = [&](int j) {
    mask_scores(s, p, row0, j * Bc, t);
    softmax_tile(s, o, row, p.scale_log2);
    pack_p<T>(pa, s);
  };
  // Tile j's K and V are read: one arrival a warp frees its stage for the producer.
  auto release = [&](int j) {
    __syncwarp();
    if (t % 32 == 0) ft::sm90::arrive(&empty[(it + j) % Tr::kStages]);
  };
  auto full_phase = [&](int j) { return uint32_t(((it + j) / Tr::kStages) & 1); };
  auto wait_full = [&](int j) { ft::sm90::wait(&full[(it + j) % Tr::kStages], full_phase(j)); };

  TileOrder<Tr> order(p);
  Work w;
  for (int q_use = 0; order.next(w); ++q_use) {
    row0 = w.q0 + c * ft::sm90::kMmaM;
#pragma unroll
    for (int i = 0; i < kO; ++i) o[i] = 0.f;
    row[0] = row[1] = ft::online_softmax_empty();

    const int n = w.num_kv_tiles;
    ft::sm90::wait(q_full, q_use & 1);
    if (n > 0) {
      if (kPingPong && last_consumer) ft::sm90::named_arrive(kTurn + 0, kTurnThreads);  // consumer 0 goes first
      wait_full(0);
    }
    if constexpr (Tr::kSchedule != Schedule::kOverlap) {
      // n + 1 turns for n tiles: S_0; then O += P_{j−1}·V_{j−1} with S_j; then the last P·V.
      // Each turn is straight-line code (a wgmma under a branch makes ptxas serialize them).
      if (n > 0) {
        turn(false, [&] { issue_qk<Tr>(s, q_addr, k_addr(0)); });
        for (int j = 1; j < n; ++j) {
          softmax(j - 1);
          wait_full(j);
          turn(false, [&] {
            issue_pv<Tr>(o, pa, v_addr(j - 1));
            issue_qk<Tr>(s, q_addr, k_addr(j));
          });
          release(j - 1);
        }
        softmax(n - 1);
        turn(true, [&] { issue_pv<Tr>(o, pa, v_addr(n - 1)); });
        release(n - 1);
      }
    } else if (n > 0) {
      // Step 5: S_{j+1} and P_j·V_j issued as two groups in one turn; the softmax of tile j + 1
      // runs as soon as S_{j+1} is done (wait<1>), while P_j·V_j still runs, and only O's
      // rescale by tile j + 1's alpha waits for P_j·V_j (wait<0>).
      turn(false, [&] { issue_qk<Tr>(s, q_addr, k_addr(0)); });
      softmax(0);  // O is still zero: rescaling it changes nothing
      for (int j = 0; j + 1 < n; ++j) {
        wait_full(j + 1);
        if (kPingPong) ft::sm90::named_sync(kTurn + c, kTurnThreads);
        ft::sm90::fence();
        issue_qk<Tr>(s, q_addr, k_addr(j + 1));
        ft::sm90::commit();
        issue_pv<Tr>(o, pa, v_addr(j));
        ft::sm90::commit();
        if (kPingPong) ft::sm90::named_arrive(kTurn + next, kTurnThreads);
        ft::sm90::wait<1>();  // S_{j+1} done, P_j·V_j may still run
        ft::sm90::fence_registers(s);
        float alpha[2];
        mask_scores(s, p, row0, (j + 1) * Bc, t);
        softmax_scores(s, row, p.scale_log2, alpha);
        ft::sm90::wait<0>();
        ft::sm90::fence_registers(o);
        release(j);
        rescale_o(o, alpha);
        pack_p<T>(pa, s);
      }
      turn(true, [&] { issue_pv<Tr>(o, pa, v_addr(n - 1)); });
      release(n - 1);
    }

    // Every product that reads Q is done: the producer may bring the next tile's, while
    // this one's output is stored.
    __syncwarp();
    if (t % 32 == 0) ft::sm90::arrive(q_empty);
    it += n;
    store_output(p, v, w.head, row0, t, o, row);
  }
}

}  // namespace ch09
