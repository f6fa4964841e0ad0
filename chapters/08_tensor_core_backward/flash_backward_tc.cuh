/// @file flash_backward_tc.cuh
/// @brief Chapter 08's kernels: FlashAttention-2's backward on the tensor cores (bf16/fp16
/// in and out, float32 accumulation).
///
/// Three kernels, in stream order:
/// 1. dot_dO_O_tc: D = rowsum(dO∘O) per query row (float32), and the float32 dQ accumulator
///    cleared on the way (it visits every row anyway);
/// 2. flash_backward_tc: one block per K/V tile of Bc keys of one head; dK and dV of those
///    keys stay in registers while the block walks the query tiles (causal: only those at or
///    below the diagonal). Per query tile, warp w, owner of keys [16w, 16w + 16):
///        Sᵀ  = K_w·Qᵀ                 (mma: A = K rows, B = Qᵀ from Q's rows)
///        Pᵀ  = exp2(Sᵀ·scale·log2e − L·log2e)   (L: the forward's float32 lse, natural log)
///        dPᵀ = V_w·dOᵀ                (mma: A = V rows, B = dOᵀ from dO's rows)
///        dSᵀ = scale · Pᵀ∘(dPᵀ − D)   (the scale of dK and dQ folded in once)
///        dV += Pᵀ·dO,  dK += dSᵀ·Q    (A = Pᵀ, dSᵀ straight from the accumulators)
///    then dSᵀ goes to shared memory, and every warp reads 16 query rows of dS back from it
///    TRANSPOSED with ldmatrix.trans as the A operand of dQ = dS·K, which is added into the
///    float32 accumulator with atomicAdd (every key block adds its share);
/// 3. convert_dq: dQ = the accumulator, rounded to bf16/fp16 once.
///
/// The other dQ strategy (DQ::kSeparatePass, chapter 05's second answer): the key blocks
/// leave dQ alone, and flash_backward_dq_tc, one block per query tile, walks the key tiles
/// and recomputes S and dP to form dS·K for its own rows: 3 more products instead of the
/// atomics, dQ written once in the dtype, no float32 accumulator.
///
/// Why the scores are computed transposed: the block's outputs dK, dV are rows of KEYS, so
/// the A operands of their products (Pᵀ, dSᵀ) must have keys as rows. Computing Sᵀ instead
/// of S puts each warp's keys on the accumulator rows, and the forward's trick (chapter 07:
/// accumulator tiles ARE the next A fragment, sm80/pack.cuh) applies unchanged: no shuffle, no
/// shared memory for dV and dK. Only dQ, whose rows are queries, needs dS the other way
/// round, and that is what ldmatrix.trans is for. (README, "The transposed products".)
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/limits.hpp"  // ft::kMaxSmemPerBlock
#include <cstdint>
#include <type_traits>

#include "08_tensor_core_backward/transposed_fragments.hpp"
#include "cuda_core/exp2.cuh"            // ft::exp2_ftz
#include "cuda_core/online_softmax.cuh"  // ft::kLog2e
#include "cuda_core/reduce.cuh"          // ft::warp_sum
#include "core/strides.hpp"         // ft::ViewArgs, ft::head_start, ft::row_stride
#include "sm80/cp_async.cuh"
#include "sm80/opaque.cuh"  // ft::tc::opaque
#include "sm80/ldmatrix.cuh"
#include "sm80/mma.cuh"
#include "sm80/pack.cuh"
#include "sm80/swizzle.hpp"
#include "sm80/tile_copy.cuh"

namespace ch08 {

using ft::tc::FragA;
using ft::tc::FragB;
using ft::tc::FragC;
using ft::tc::RowCol;

using ft::tc::Copy;  // how a tile reaches shared memory: kSync, or kAsync into a second buffer

/// How dQ = scale·dS·K, a sum over every key block, is formed.
enum class DQ {
  kAtomics,      ///< each key block adds its share into a float32 accumulator (atomicAdd)
  kSeparatePass, ///< a second kernel per query tile recomputes dS and sums over the keys
};

/// The kernel's shape. Every limit the kernel relies on is a static_assert here.
template <class Element, int D_, int Br_, int Bc_, int Warps_, Copy kCopy_ = Copy::kSync,
          DQ kDq_ = DQ::kAtomics>
struct BackwardTraits {
  using T = Element;  ///< __nv_bfloat16 or __half
  static constexpr int D = D_;    ///< head dimension d
  static constexpr int Br = Br_;  ///< queries per query tile (the loop's step)
  static constexpr int Bc = Bc_;  ///< keys per block (dK, dV rows kept in registers)
  static constexpr int kWarps = Warps_;
  static constexpr int kThreads = kWarps * ft::tc::kLanes;
  static constexpr Copy kCopy = kCopy_;
  static constexpr DQ kDq = kDq_;
  /// Query tiles in shared memory: with cp.async the next one lands while this one is used.
  static constexpr int kStages = kCopy == Copy::kAsync ? 2 : 1;
  using Tile = ft::tc::SwizzledTile<D>;     ///< Q, dO, K, V: rows of d elements
  /// Contiguous tensors (the layout contract); ft::Views<...> of these traits read views.
  static constexpr bool kViews = false;
  /// dSᵀ: one row of Br queries per key; swizzled when a row is whole 128-byte periods
  /// (Br = 64), else padded by 16 bytes (Br = 32: rows of 80 bytes, 8 rows in 8 bank groups).
  using DsTile = std::conditional_t<Br % 64 == 0, ft::tc::SwizzledTile<Br>, ft::tc::PaddedTile<Br>>;

  static constexpr int kKeysPerWarp = Bc / kWarps;        ///< one 16-row mma tile per warp
  static constexpr int kDSteps = D / ft::tc::kMmaK;       ///< k-steps of Sᵀ, dPᵀ (over d)
  static constexpr int kQTiles = Br / ft::tc::kMmaN;      ///< 8-query tiles of Sᵀ, dPᵀ
  static constexpr int kQSteps = Br / ft::tc::kMmaK;      ///< k-steps of dV, dK (over queries)
  static constexpr int kDTiles = D / ft::tc::kMmaN;       ///< 8-column tiles of dK, dV, dQ
  static constexpr int kKeySteps = Bc / ft::tc::kMmaK;    ///< k-steps of dQ (over keys)
  /// dQ = dS·K: the tile's Br/16 query row tiles, and each shared by kWarpsPerDqRows warps
  /// that split its d columns (with Br = 64 and 4 warps: a warp per 16 rows, all columns).
  static constexpr int kDqRowTiles = Br / ft::tc::kMmaM;
  static constexpr int kWarpsPerDqRows = kWarps / kDqRowTiles;
  static constexpr int kDqTiles = kDTiles / kWarpsPerDqRows;  ///< 8-column tiles a warp sums
  /// ... at most 8 at a time (64 columns, 32 float registers), one chunk after the other.
  static constexpr int kDqChunkTiles = kDqTiles < 8 ? kDqTiles : 8;

  static constexpr int kQBytes = ft::tc::tile_bytes<Tile>(Br);   ///< Q or dO
  static constexpr int kKBytes = ft::tc::tile_bytes<Tile>(Bc);   ///< K or V
  /// dSᵀ, read back by the dQ product (none when a separate pass forms dQ).
  static constexpr int kDsBytes = kDq == DQ::kAtomics ? ft::tc::tile_bytes<DsTile>(Bc) : 0;
  static constexpr int kRowStatBytes = Br * int(sizeof(float));  ///< L (the lse), or D
  /// One stage: a query tile's Q, dO, L and D.
  static constexpr int kStageBytes = 2 * kQBytes + 2 * kRowStatBytes;
  /// K, V, dSᵀ, then the stages.
  static constexpr size_t kSmemBytes = size_t(2 * kKBytes + kDsBytes + kStages * kStageBytes);

  static_assert(kKeysPerWarp == ft::tc::kMmaM, "each warp owns exactly one 16-key mma tile");
  static_assert(Br % ft::tc::kMmaK == 0 && D % ft::tc::kMmaK == 0, "whole k-steps");
  static_assert(kQTiles % 2 == 0 && kDTiles % 2 == 0, "B fragments are loaded in pairs (x4)");
  static_assert(kWarps % kDqRowTiles == 0 && kDTiles % kWarpsPerDqRows == 0 &&
                    kDqTiles % kDqChunkTiles == 0 && kDqChunkTiles % 2 == 0,
                "the dQ product splits into whole pairs of tiles per warp");
  static_assert(2 * (kQTiles + kDTiles) * ft::tc::kCElems <= 192,
                "Sᵀ, dPᵀ, dK, dV accumulators must leave registers for the rest (255 max)");
  static_assert(kSmemBytes <= ft::kMaxSmemPerBlock, "at most 227 KB of shared memory per block (sm_90)");
};

/// The arguments of the key-block kernels: one head is N·d elements of each tensor, heads
/// back to back, unless the traits read views (ft::Views): then the ft::ViewArgs beside them
/// say where each tensor's rows are. lse, D and dq_acc are contiguous [B,H,N] and [B,H,N,d]
/// either way.
template <class T>
struct Params {
  const T* Q;
  const T* K;
  const T* V;
  const T* dO;
  const float* lse;   ///< [B,H,N], natural log (the layout contract)
  const float* Drow;  ///< [B,H,N]: rowsum(dO∘O), from dot_dO_O_tc
  float* dq_acc;      ///< [B,H,N,d] float32, zero on entry; every key block adds into it
                      ///< (DQ::kAtomics; unused with a separate dQ pass)
  T* dK;
  T* dV;
  int N;
  int num_kv_tiles;  ///< ceil(N / Bc): blocks per head
  bool causal;
  float scale;       ///< softmax scale (folded into dS)
  float scale_log2;  ///< scale · log2(e)
};

using ft::tc::from_float;  // sm80/pack.cuh
using ft::tc::to_float;



/// Adds (a, b) to dst[0], dst[1] (8-byte aligned): one float2 atomic on sm_90, two before.
__device__ __forceinline__ void atomic_add2(float* dst, float a, float b) {
#if __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2*>(dst), make_float2(a, b));
#else
  atomicAdd(dst, a);
  atomicAdd(dst + 1, b);
#endif
}

// ---- 1. D = rowsum(dO∘O), dQ's accumulator cleared ----------------------------------------

constexpr int kSmallBlock = 256;                            ///< threads of the small kernels
constexpr int kRowsPerBlock = kSmallBlock / ft::kWarpSize;  ///< dot_dO_O_tc: a warp per row

/// One warp per row: lanes stride over the d elements (coalesced), a shuffle sums in float32.
/// dq_acc may be null (a separate dQ pass needs no accumulator). With kViews, O and dO are
/// read where their strides say: row b·H·N + h·N + n of the [B,H,N] grid is token n of head
/// h of batch b (D and dq_acc stay contiguous).
template <class T, bool kViews>
__global__ void dot_dO_O_tc(const T* O, ft::Strides sO, const T* dO, ft::Strides sdO, float* D,
                            float* dq_acc, int64_t rows, int N, int H, int d) {
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / ft::kWarpSize;
  if (row >= rows) return;  // whole warps leave together: the shuffle stays full
  const int lane = threadIdx.x % ft::kWarpSize;
  const T* o = O + row * d;  // this row of O and of dO
  const T* g = dO + row * d;
  if constexpr (kViews) {
    const int64_t head = row / N, n = row - head * N;
    o = O + ft::head_start(sO, head, H) + n * sO.row;
    g = dO + ft::head_start(sdO, head, H) + n * sdO.row;
  }
  float sum = 0.f;
  for (int k = lane; k < d; k += ft::kWarpSize) {
    sum += to_float(o[k]) * to_float(g[k]);
    if (dq_acc) dq_acc[row * d + k] = 0.f;
  }
  sum = ft::warp_sum(sum);
  if (lane == 0) D[row] = sum;
}

// ---- A query tile in shared memory: the stages both key-block kernels walk --------------

/// Stage st (of one or two, back to back from `base`): Q [Br][D], dO [Br][D], then L [Br]
/// (the lse, natural log) and D [Br].
template <class T, class Tile, int Br>
struct QueryStages {
  static constexpr int kBytes = 2 * ft::tc::tile_bytes<Tile>(Br) + 2 * Br * int(sizeof(float));
  unsigned char* base;
  __device__ T* q(int st) const { return reinterpret_cast<T*>(base + st * kBytes); }
  __device__ T* dO(int st) const { return q(st) + Br * Tile::kRowStride; }
  __device__ float* l(int st) const { return reinterpret_cast<float*>(dO(st) + Br * Tile::kRowStride); }
  __device__ float* d(int st) const { return l(st) + Br; }
};

/// Copies a query tile from row q0 of one head (Q, dO; L and D by 4-byte cp.async; rows past
/// N become zeros) into stage st, as one commit group. Constructed once per kernel: each
/// thread's offsets are computed then (tc::TileCopy), not at every tile. ldq, lddo: Q's and
/// dO's row strides (ft::row_stride: ContiguousRows, or a view's).
template <int THREADS, class T, class Tile, int Br, bool kViews = false>
struct QueryTileLoader {
  ft::tc::TileCopy<Tile, Br, THREADS> rows;
  __device__ __forceinline__ void operator()(const QueryStages<T, Tile, Br>& s, int st, const T* Q,
                                             const T* dO, const float* lse, const float* Drow,
                                             int64_t head_rows, int q0, int N,
                                             ft::RowStride<kViews> ldq = {},
                                             ft::RowStride<kViews> lddo = {}) const {
    rows(s.q(st), Q, q0, N, ldq);
    rows(s.dO(st), dO, q0, N, lddo);
    // A compile-time count of rounds (the kernels run THREADS threads), not a loop on
    // threadIdx.x that the compiler cannot bound.
#pragma unroll
    for (int round = 0; round < (2 * Br + THREADS - 1) / THREADS; ++round) {
      const int r = int(threadIdx.x) + round * THREADS;
      if (2 * Br % THREADS != 0 && r >= 2 * Br) break;
      const int row = r % Br;
      const bool in = q0 + row < N;
      const float* src = (r < Br ? lse : Drow) + head_rows + (in ? q0 + row : 0);
      ft::tc::cp_async_4((r < Br ? s.l(st) : s.d(st)) + row, src, in);
    }
    ft::tc::cp_async_commit();
  }
};

// ---- 2. dK, dV in registers; dQ's share by atomics ------------------------------------------

template <class Tr>
__global__ void __launch_bounds__(Tr::kThreads) flash_backward_tc(const Params<typename Tr::T> p,
                                                                   const ft::ViewArgs v) {
  using T = typename Tr::T;
  using Tile = typename Tr::Tile;
  using DsTile = typename Tr::DsTile;
  constexpr int D = Tr::D, Br = Tr::Br, Bc = Tr::Bc;

  extern __shared__ uint4 smem_raw[];  // uint4: 16-byte aligned for ldmatrix and uint4 copies
  T* Ks = reinterpret_cast<T*>(smem_raw);     // [Bc][D]
  T* Vs = Ks + Bc * Tile::kRowStride;         // [Bc][D]
  T* dSt = Vs + Bc * Tile::kRowStride;        // [Bc][Br]: dSᵀ, keys × queries (kAtomics)
  const QueryStages<T, Tile, Br> stage{reinterpret_cast<unsigned char*>(smem_raw) + 2 * Tr::kKBytes +
                                       Tr::kDsBytes};
  static_assert(decltype(stage)::kBytes == Tr::kStageBytes, "one layout of a stage");

  const int lane = ft::tc::lane_id(), warp = threadIdx.x / ft::tc::kLanes;
  // A head's key blocks are adjacent on grid.x, key tile 0 first: under the causal mask it
  // walks every query tile, the longest block, and the longest start first.
  const int k0 = int(blockIdx.x % p.num_kv_tiles) * Bc;
  const int64_t head = blockIdx.x / p.num_kv_tiles;  // b·H + h
  const int N = p.N;
  const int64_t head_rows = head * N;  // first row of this head in [B,H,N]
  // This head's rows: heads back to back (the layout contract), or where a view's strides
  // put them (strides.hpp; the contiguous lines stay as they were measured).
  constexpr bool kViews = Tr::kViews;
  const T* Q = p.Q + head_rows * D;
  const T* dO = p.dO + head_rows * D;
  const T* K = p.K + head_rows * D;
  const T* V = p.V + head_rows * D;
  if constexpr (kViews) {
    Q = p.Q + ft::head_start(v.strides.Q, head, v.heads);
    dO = p.dO + ft::head_start(v.strides.dO, head, v.heads);
    K = p.K + ft::head_start(v.strides.K, head, v.heads);
    V = p.V + ft::head_start(v.strides.V, head, v.heads);
  }
  const auto ldq = ft::row_stride<kViews>(v.strides.Q);
  const auto lddo = ft::row_stride<kViews>(v.strides.dO);
  const int warp_key0 = warp * Tr::kKeysPerWarp;  // this warp's keys in the block's tile

  // Query tile i (Q, dO, and L, D of its rows; rows past N: zeros) into stage st.
  const QueryTileLoader<Tr::kThreads, T, Tile, Br, kViews> load_async{};
  auto load_query_tile = [&](int i, int st) {
    const int q0 = i * Br;
    if constexpr (Tr::kCopy == Copy::kAsync) {
      load_async(stage, st, Q, dO, p.lse, p.Drow, head_rows, q0, N, ldq, lddo);
    } else {
      ft::tc::copy_tile_sync<Tile, Br, Tr::kThreads>(stage.q(st), Q, q0, N, ldq);
      ft::tc::copy_tile_sync<Tile, Br, Tr::kThreads>(stage.dO(st), dO, q0, N, lddo);
      for (int r = threadIdx.x; r < Br; r += Tr::kThreads) {
        const bool in = q0 + r < N;
        stage.l(st)[r] = in ? p.lse[head_rows + q0 + r] : 0.f;
        stage.d(st)[r] = in ? p.Drow[head_rows + q0 + r] : 0.f;
      }
    }
  };

  const int num_q_tiles = (N + Br - 1) / Br;
  // Causal: queries before k0 see none of these keys; start at the tile holding query k0.
  const int i_first = p.causal ? k0 / Br : 0;
  // With cp.async the first query tile starts on its way before K and V are copied.
  if constexpr (Tr::kCopy == Copy::kAsync) load_query_tile(i_first, 0);

  // K and V of the block's keys, once (rows past N are zeros); the loop's first barrier
  // makes them visible to every warp.
  ft::tc::copy_tile_sync<Tile, Bc, Tr::kThreads>(Ks, K, k0, N, ft::row_stride<kViews>(v.strides.K));
  ft::tc::copy_tile_sync<Tile, Bc, Tr::kThreads>(Vs, V, k0, N, ft::row_stride<kViews>(v.strides.V));

  FragC dk[Tr::kDTiles] = {}, dv[Tr::kDTiles] = {};  // this warp's 16 keys × d, float32

  for (int i = i_first; i < num_q_tiles; ++i) {
    const int q0 = i * Br;
    const int st = Tr::kStages == 2 ? (i - i_first) % 2 : 0;
    if constexpr (Tr::kCopy == Copy::kAsync) {
      ft::tc::cp_async_wait<0>();  // this thread's part of tile i has landed
      __syncthreads();  // ... everyone's; and every warp is done with tile i−1 (its stage, dSᵀ)
      if (i + 1 < num_q_tiles) load_query_tile(i + 1, 1 - st);  // flies while tile i is used
    } else {
      __syncthreads();  // every warp is done with the previous Q, dO, dSᵀ, L, D
      load_query_tile(i, 0);
      __syncthreads();  // the query tile is in shared memory (and K, V the first time)
    }
    const T* Qs = stage.q(st);
    const T* dOs = stage.dO(st);
    const float* Ls = stage.l(st);
    const float* Ds = stage.d(st);

    // Sᵀ = K_w·Qᵀ: per k-step of 16 columns of d, one A fragment from this warp's rows of
    // K, and Qᵀ's B fragments from Q's rows without a transpose, exactly as chapter 07 reads
    // Kᵀ from K.
    FragC sc[Tr::kQTiles] = {};
#pragma unroll
    for (int ks = 0; ks < Tr::kDSteps; ++ks) {
      FragA ka;
      ft::tc::load_a<Tile>(ka, Ks, warp_key0, ks * 16);
#pragma unroll
      for (int nt = 0; nt < Tr::kQTiles; nt += 2) {
        FragB qb[2];
        ft::tc::load_b_x4<Tile>(qb, Qs, nt * 8, ks * 16);
        ft::tc::mma_m16n8k16<T>(sc[nt], ka, qb[0]);
        ft::tc::mma_m16n8k16<T>(sc[nt + 1], ka, qb[1]);
      }
    }

    // Pᵀ, element by element: accumulator element e of tile nt is key warp_key0 + row,
    // query nt·8 + col. P = 0 for a key past N, a query past N, or (causal) a key after the
    // query (a select, not a product: the exp of a masked score may be Inf); the test is
    // only made in the tiles that have such an element.
    const bool masked = k0 + Bc > N || q0 + Br > N || (p.causal && k0 + Bc - 1 > q0);
#pragma unroll
    for (int nt = 0; nt < Tr::kQTiles; ++nt)
#pragma unroll
      for (int e = 0; e < ft::tc::kCElems; ++e) {
        const RowCol at = ft::tc::mma_c_coord(lane, e);
        const int qr = nt * 8 + at.col;  // query row in the tile
        float prob = ft::exp2_ftz(fmaf(sc[nt].c[e], p.scale_log2, -Ls[qr] * ft::kLog2e));
        if (masked) {
          const int key = k0 + warp_key0 + at.row, query = q0 + qr;
          if (key >= N || query >= N || (p.causal && key > query)) prob = 0.f;
        }
        sc[nt].c[e] = prob;
      }
    // Pᵀ packed to bf16/fp16: for 16 queries (k-step kk) the two accumulator tiles of those
    // queries ARE the A fragment of dV += Pᵀ·dO (the forward's P·V trick, keys on the rows
    // here as queries were there). Kept packed: half the registers of the floats, and dS
    // below uses the very P that dV used.
    FragA pa[Tr::kQSteps];
#pragma unroll
    for (int kk = 0; kk < Tr::kQSteps; ++kk)
      pa[kk] = ft::tc::a_from_accumulators<T>(sc[2 * kk], sc[2 * kk + 1]);

    // dV += Pᵀ·dO: dO's B fragments come transposed from its rows, as chapter 07 reads V.
#pragma unroll
    for (int kk = 0; kk < Tr::kQSteps; ++kk)
#pragma unroll
      for (int ot = 0; ot < Tr::kDTiles; ot += 2) {
        FragB ob[2];
        ft::tc::load_b_trans_x4<Tile>(ob, dOs, kk * 16, ot * 8);
        ft::tc::mma_m16n8k16<T>(dv[ot], pa[kk], ob[0]);
        ft::tc::mma_m16n8k16<T>(dv[ot + 1], pa[kk], ob[1]);
      }

    // dPᵀ = V_w·dOᵀ, as Sᵀ was formed.
    FragC dpt[Tr::kQTiles] = {};
#pragma unroll
    for (int ks = 0; ks < Tr::kDSteps; ++ks) {
      FragA va;
      ft::tc::load_a<Tile>(va, Vs, warp_key0, ks * 16);
#pragma unroll
      for (int nt = 0; nt < Tr::kQTiles; nt += 2) {
        FragB ob[2];
        ft::tc::load_b_x4<Tile>(ob, dOs, nt * 8, ks * 16);
        ft::tc::mma_m16n8k16<T>(dpt[nt], va, ob[0]);
        ft::tc::mma_m16n8k16<T>(dpt[nt + 1], va, ob[1]);
      }
    }

    // dSᵀ = scale·Pᵀ∘(dPᵀ − D), P read back from its packed pairs (packed_pair), then packed
    // itself: the A fragment of dK += dSᵀ·Q.
    FragA dsa[Tr::kQSteps];
#pragma unroll
    for (int nt = 0; nt < Tr::kQTiles; ++nt)
#pragma unroll
      for (int h = 0; h < ft::tc::kMBlocks; ++h) {
        const PackedPair at = packed_pair(nt, h);
        const float2 prob = ft::tc::unpack2<T>(pa[at.kk].r[at.reg]);
        const int qr = nt * 8 + ft::tc::mma_c_coord(lane, 2 * h).col;  // queries qr, qr + 1
        dsa[at.kk].r[at.reg] =
            ft::tc::pack2<T>(p.scale * prob.x * (dpt[nt].c[2 * h] - Ds[qr]),
                             p.scale * prob.y * (dpt[nt].c[2 * h + 1] - Ds[qr + 1]));
      }

    // dK += dSᵀ·Q, Q's B fragments transposed from its rows.
#pragma unroll
    for (int kk = 0; kk < Tr::kQSteps; ++kk)
#pragma unroll
      for (int ot = 0; ot < Tr::kDTiles; ot += 2) {
        FragB qb[2];
        ft::tc::load_b_trans_x4<Tile>(qb, Qs, kk * 16, ot * 8);
        ft::tc::mma_m16n8k16<T>(dk[ot], dsa[kk], qb[0]);
        ft::tc::mma_m16n8k16<T>(dk[ot + 1], dsa[kk], qb[1]);
      }

    // dQ's share of these keys: by atomics here, or not at all (the separate pass).
    if constexpr (Tr::kDq == DQ::kAtomics) {
      // dSᵀ to shared memory, as stored [key][query]: each packed pair (two queries of one
      // key) is one 32-bit store, the same rounded values the dK product used.
#pragma unroll
      for (int nt = 0; nt < Tr::kQTiles; ++nt)
#pragma unroll
        for (int h = 0; h < ft::tc::kMBlocks; ++h) {
          const RowCol at = ds_store_coord(lane, warp_key0, nt, h);
          const PackedPair from = packed_pair(nt, h);
          *reinterpret_cast<uint32_t*>(dSt + DsTile::offset(at.row, at.col)) =
              dsa[from.kk].r[from.reg];
        }
      __syncthreads();  // all Bc keys of dSᵀ are stored

      // dQ_tile += dS·K over the block's Bc keys: A = dS (queries × keys) read TRANSPOSED from
      // the [key][query] tile with ldmatrix.trans (tc::load_a_trans), B = K from K's rows with
      // .trans (K is [key][d] = [k][n]). Then one float2 atomicAdd per lane and pair.
      // The warp's dQ columns are done in chunks of at most 64 (8 tiles): at d = 128 the
      // whole 16×128 float tile (64 registers) on top of dK and dV would not fit in 255.
      const int dq_q0 = (warp / Tr::kWarpsPerDqRows) * ft::tc::kMmaM;  // query row in the tile
#pragma unroll
      for (int chunk = 0; chunk < Tr::kDqTiles / Tr::kDqChunkTiles; ++chunk) {
        const int dq_t0 = (warp % Tr::kWarpsPerDqRows) * Tr::kDqTiles + chunk * Tr::kDqChunkTiles;
        FragC dq[Tr::kDqChunkTiles] = {};
#pragma unroll
        for (int kk = 0; kk < Tr::kKeySteps; ++kk) {
          FragA dsa_t;
          const RowCol corner = ds_a_corner(kk, dq_q0);
          ft::tc::load_a_trans<DsTile>(dsa_t, dSt, corner.row, corner.col);
#pragma unroll
          for (int ot = 0; ot < Tr::kDqChunkTiles; ot += 2) {
            FragB kb[2];
            ft::tc::load_b_trans_x4<Tile>(kb, Ks, kk * 16, (dq_t0 + ot) * 8);
            ft::tc::mma_m16n8k16<T>(dq[ot], dsa_t, kb[0]);
            ft::tc::mma_m16n8k16<T>(dq[ot + 1], dsa_t, kb[1]);
          }
        }
#pragma unroll
        for (int ot = 0; ot < Tr::kDqChunkTiles; ++ot)
#pragma unroll
          for (int h = 0; h < ft::tc::kMBlocks; ++h) {
            const RowCol at = ft::tc::mma_c_coord(lane, 2 * h);
            const int query = q0 + dq_q0 + at.row, col = (dq_t0 + ot) * 8 + at.col;
            if (query < N)
              atomic_add2(p.dq_acc + (head_rows + query) * D + col, dq[ot].c[2 * h],
                          dq[ot].c[2 * h + 1]);
          }
      }
    }
  }

  // dK, dV of this warp's keys, each element written once (keys past N are not stored).
#pragma unroll
  for (int ot = 0; ot < Tr::kDTiles; ++ot)
#pragma unroll
    for (int h = 0; h < ft::tc::kMBlocks; ++h) {
      const RowCol at = ft::tc::mma_c_coord(lane, 2 * h);
      const int key = k0 + warp_key0 + at.row, col = ot * 8 + at.col;
      if (key < N) {
        T* dK = p.dK + (head_rows + key) * D + col;  // contiguous
        T* dV = p.dV + (head_rows + key) * D + col;
        if constexpr (kViews) {
          dK = p.dK + ft::head_start(v.strides.dK, head, v.heads) + key * v.strides.dK.row + col;
          dV = p.dV + ft::head_start(v.strides.dV, head, v.heads) + key * v.strides.dV.row + col;
        }
        *reinterpret_cast<uint32_t*>(dK) = ft::tc::pack2<T>(dk[ot].c[2 * h], dk[ot].c[2 * h + 1]);
        *reinterpret_cast<uint32_t*>(dV) = ft::tc::pack2<T>(dv[ot].c[2 * h], dv[ot].c[2 * h + 1]);
      }
    }
}

// ---- 2b. The separate dQ pass: one block per query tile, dQ in registers ------------------

/// The dQ pass's shape: Br query rows a block, 16 a warp (queries on the accumulator rows,
/// as in chapter 07's forward), Bc keys a tile.
template <class Element, int D_, int Br_, int Bc_>
struct DqTraits {
  using T = Element;
  static constexpr int D = D_, Br = Br_, Bc = Bc_;
  static constexpr int kWarps = Br / ft::tc::kMmaM;  ///< one 16-query mma tile per warp
  static constexpr int kThreads = kWarps * ft::tc::kLanes;
  using Tile = ft::tc::SwizzledTile<D>;
  static constexpr int kDSteps = D / ft::tc::kMmaK;     ///< k-steps of S, dP (over d)
  static constexpr int kKeyTiles = Bc / ft::tc::kMmaN;  ///< 8-key tiles of S, dP
  static constexpr int kKeySteps = Bc / ft::tc::kMmaK;  ///< k-steps of dQ (over keys)
  static constexpr int kDTiles = D / ft::tc::kMmaN;     ///< 8-column tiles of dQ
  static constexpr int kQBytes = ft::tc::tile_bytes<Tile>(Br);
  static constexpr int kKBytes = ft::tc::tile_bytes<Tile>(Bc);
  static constexpr size_t kSmemBytes = size_t(2 * kQBytes + 2 * kKBytes);  ///< Q, dO, K, V
  static_assert(kKeyTiles % 2 == 0 && kDTiles % 2 == 0, "B fragments are loaded in pairs (x4)");
  static_assert(2 * kKeyTiles * ft::tc::kCElems + kDTiles * ft::tc::kCElems <= 160,
                "S, dP and dQ accumulators must leave registers for the rest");
};

/// dQ_i = scale · Σ_j P_ij (dP_ij − D_i) k_j for the block's query rows: S = Q·Kᵀ and dP =
/// dO·Vᵀ recomputed per key tile, P = exp2(S·scale·log2e − L·log2e), and dS straight from
/// the accumulators as the A operand of dS·K (chapter 07's P·V trick), K read transposed.
template <class Tr>
__global__ void __launch_bounds__(Tr::kThreads) flash_backward_dq_tc(const Params<typename Tr::T> p,
                                                                     typename Tr::T* dQ,
                                                                     int num_q_tiles) {
  using T = typename Tr::T;
  using Tile = typename Tr::Tile;
  constexpr int D = Tr::D, Br = Tr::Br, Bc = Tr::Bc;
  extern __shared__ uint4 smem_raw[];
  T* Qs = reinterpret_cast<T*>(smem_raw);  // [Br][D]
  T* dOs = Qs + Br * Tile::kRowStride;     // [Br][D]
  T* Ks = dOs + Br * Tile::kRowStride;     // [Bc][D]
  T* Vs = Ks + Bc * Tile::kRowStride;      // [Bc][D]

  const int lane = ft::tc::lane_id(), warp = threadIdx.x / ft::tc::kLanes;
  const int q0 = int(blockIdx.x % num_q_tiles) * Br;
  const int64_t head = blockIdx.x / num_q_tiles;
  const int N = p.N;
  const int64_t head_rows = head * N;
  const int warp_q0 = warp * ft::tc::kMmaM;
  ft::tc::copy_tile_sync<Tile, Br, Tr::kThreads>(Qs, p.Q + head_rows * D, q0, N);
  ft::tc::copy_tile_sync<Tile, Br, Tr::kThreads>(dOs, p.dO + head_rows * D, q0, N);
  // This lane's two query rows (accumulator rows g and g + 8): L·log2e and D in registers.
  float l2[ft::tc::kMBlocks], drow[ft::tc::kMBlocks];
#pragma unroll
  for (int h = 0; h < ft::tc::kMBlocks; ++h) {
    const int q = q0 + warp_q0 + ft::tc::mma_c_coord(lane, 2 * h).row;
    l2[h] = q < N ? p.lse[head_rows + q] * ft::kLog2e : 0.f;
    drow[h] = q < N ? p.Drow[head_rows + q] : 0.f;
  }

  FragC dq[Tr::kDTiles] = {};
  const int kv_end = p.causal ? min(N, q0 + Br) : N;  // causal: no tile above the diagonal
  for (int k0 = 0; k0 < kv_end; k0 += Bc) {
    __syncthreads();  // every warp is done with the previous K, V
    ft::tc::copy_tile_sync<Tile, Bc, Tr::kThreads>(Ks, p.K + head_rows * D, k0, N);
    ft::tc::copy_tile_sync<Tile, Bc, Tr::kThreads>(Vs, p.V + head_rows * D, k0, N);
    __syncthreads();

    // S = Q_w·Kᵀ and dP = dO_w·Vᵀ: A from this warp's rows, B from K's and V's rows.
    FragC sc[Tr::kKeyTiles] = {}, dp[Tr::kKeyTiles] = {};
#pragma unroll
    for (int ks = 0; ks < Tr::kDSteps; ++ks) {
      FragA qa, oa;
      ft::tc::load_a<Tile>(qa, Qs, warp_q0, ks * 16);
      ft::tc::load_a<Tile>(oa, dOs, warp_q0, ks * 16);
#pragma unroll
      for (int nt = 0; nt < Tr::kKeyTiles; nt += 2) {
        FragB kb[2], vb[2];
        ft::tc::load_b_x4<Tile>(kb, Ks, nt * 8, ks * 16);
        ft::tc::load_b_x4<Tile>(vb, Vs, nt * 8, ks * 16);
        ft::tc::mma_m16n8k16<T>(sc[nt], qa, kb[0]);
        ft::tc::mma_m16n8k16<T>(sc[nt + 1], qa, kb[1]);
        ft::tc::mma_m16n8k16<T>(dp[nt], oa, vb[0]);
        ft::tc::mma_m16n8k16<T>(dp[nt + 1], oa, vb[1]);
      }
    }
    // dS = scale·P∘(dP − D), P = 0 for a key past N or (causal) after the query.
    const bool masked = k0 + Bc > N || (p.causal && k0 + Bc - 1 > q0);
#pragma unroll
    for (int nt = 0; nt < Tr::kKeyTiles; ++nt)
#pragma unroll
      for (int e = 0; e < ft::tc::kCElems; ++e) {
        const int h = e / ft::tc::kPair;  // c0, c1: row g; c2, c3: row g + 8
        const RowCol at = ft::tc::mma_c_coord(lane, e);
        float prob = ft::exp2_ftz(fmaf(sc[nt].c[e], p.scale_log2, -l2[h]));
        if (masked) {
          const int key = k0 + nt * 8 + at.col, query = q0 + warp_q0 + at.row;
          if (key >= N || (p.causal && key > query)) prob = 0.f;
        }
        sc[nt].c[e] = p.scale * prob * (dp[nt].c[e] - drow[h]);
      }
    // dQ += dS·K: dS's A fragments are its accumulator tiles; K's B fragments transposed.
#pragma unroll
    for (int kk = 0; kk < Tr::kKeySteps; ++kk) {
      const FragA dsa = ft::tc::a_from_accumulators<T>(sc[2 * kk], sc[2 * kk + 1]);
#pragma unroll
      for (int ot = 0; ot < Tr::kDTiles; ot += 2) {
        FragB kb[2];
        ft::tc::load_b_trans_x4<Tile>(kb, Ks, kk * 16, ot * 8);
        ft::tc::mma_m16n8k16<T>(dq[ot], dsa, kb[0]);
        ft::tc::mma_m16n8k16<T>(dq[ot + 1], dsa, kb[1]);
      }
    }
  }

  // dQ of this warp's rows, each element written once, in the dtype.
#pragma unroll
  for (int ot = 0; ot < Tr::kDTiles; ++ot)
#pragma unroll
    for (int h = 0; h < ft::tc::kMBlocks; ++h) {
      const RowCol at = ft::tc::mma_c_coord(lane, 2 * h);
      const int query = q0 + warp_q0 + at.row, col = ot * 8 + at.col;
      if (query < N)
        *reinterpret_cast<uint32_t*>(dQ + (head_rows + query) * D + col) =
            ft::tc::pack2<T>(dq[ot].c[2 * h], dq[ot].c[2 * h + 1]);
    }
}

// ---- 3. dQ from its float32 accumulator, rounded once ---------------------------------------

template <class T>
__global__ void convert_dq(const float* dq_acc, T* dQ, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dQ[i] = from_float<T>(dq_acc[i]);
}

/// Elements convert_dq_views rounds at a time: 8, one 16-byte store of bf16/fp16.
constexpr int kConvertElems = 8;

/// convert_dq into a view: chunk i of 8 elements is row i / (D/8) of the contiguous [B,H,N,d]
/// accumulator (two float4 loads), stored where dQ's strides put that row (every row starts
/// 16-byte aligned: ft::check_strides).
template <class T, int D>
__global__ void convert_dq_views(const float* dq_acc, T* dQ, ft::Strides s, int64_t rows, int N,
                                 int H) {
  constexpr int kChunksPerRow = D / kConvertElems;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * kChunksPerRow;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / kChunksPerRow, head = row / N;
    const int col = int(i % kChunksPerRow) * kConvertElems;
    const float4 lo = *reinterpret_cast<const float4*>(dq_acc + row * D + col);
    const float4 hi = *reinterpret_cast<const float4*>(dq_acc + row * D + col + 4);
    const uint4 out = {ft::tc::pack2<T>(lo.x, lo.y), ft::tc::pack2<T>(lo.z, lo.w),
                       ft::tc::pack2<T>(hi.x, hi.y), ft::tc::pack2<T>(hi.z, hi.w)};
    *reinterpret_cast<uint4*>(dQ + ft::head_start(s, head, H) + (row - head * N) * s.row + col) = out;
  }
}

}  // namespace ch08
