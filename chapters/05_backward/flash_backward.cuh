/// @file flash_backward.cuh
/// @brief Chapter 05's flash backward kernels (float32, CUDA cores): P is recomputed from
/// Q, K and the saved log-sum-exp tile by tile, never stored.
///
/// Tiles reach shared memory by cp.async (copy_async.cuh), and a dK/dV block copies its next
/// query tile while it computes dQ on the current one. Four kernels share the pieces in this
/// file:
/// - flash_backward_atomic_dq: a block owns Bc keys, keeps dK and dV in registers, loops
///   over the query tiles and adds each tile's share of dQ into device memory with atomics;
/// - flash_backward_atomic_dq_sync (variant flash_sync): the same kernel with plain loads
///   and stores instead of cp.async (copy_sync.cuh), to show what the overlap buys;
/// - flash_backward_dkdv + flash_backward_dq: the same dK/dV kernel without dQ, and a second
///   kernel where a block owns Br queries and loops over the key tiles to form dQ in
///   registers (no atomics, deterministic, but S, P and dP are recomputed a second time).
///
/// Notation as in the FlashAttention papers: S = Q·Kᵀ, P = exp(S·scale − L) (L the saved
/// log-sum-exp), dV = Pᵀ·dO, dP = dO·Vᵀ, dS = P∘(dP − D) with D = rowsum(dO∘O),
/// dQ = scale·dS·K, dK = scale·dSᵀ·Q.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_core/tile_ops.cuh"  // Split, load_fragment, store_fragment, mma_tile
#include "05_backward/copy_async.cuh"      // CopyAsync (and CopySync, copy_sync.cuh)
#include "cuda_core/online_softmax.cuh"                // ft::kLog2e

namespace ch05 {

// ---- Tile shape ------------------------------------------------------------------------
// 256 threads = 8 warps, laid out as a 16×16 grid over every tile. A 64×64 score tile then
// gives each thread a 4×4 micro-tile: 16 independent FMAs for every two float4 loads from
// shared memory, enough to keep the FMA units ahead of shared memory.
constexpr int kGrid = 16;                ///< threads per side of the thread grid
constexpr int kThreads = kGrid * kGrid;  ///< 256 threads per block
// Shared-memory row strides, padded against bank conflicts (32 banks of 4 bytes).
// d-wide tiles (Q, dO, K, V): stride d + 4. Eight consecutive rows then start 4 banks
// apart, so the 8 different rows a warp reads as float4 cover all 32 banks once. (Every
// other row then starts 16 bytes off a 32-byte boundary, and cp.async brings 1.49x the
// sectors from L2, as if those rows came twice. A pad of 8 aligns every row and costs
// 14-16% in bank conflicts; the L2 has the bandwidth to spare. README, "Bank conflicts".)
constexpr int kPadD = 4;
// Bc-wide tiles (P, dS): stride Bc + 8. A warp is a 4×8 patch of the thread grid; its
// scalar stores to rows r..r+3, columns c..c+7 land in banks 8·r + c: all 32 distinct.
constexpr int kPadP = 8;
/// Shared memory of one H200 SM (228 KB), of which the runtime keeps 1 KB per block.
constexpr size_t kSmemPerSm = 228 * 1024, kSmemReservedPerBlock = 1024;

/// kCount consecutive positions a thread owns, kCount·t to kCount·t + kCount − 1, read in
/// float4 runs: the keys of dK and dV a thread accumulates (its rows of the Bc-wide P and
/// dS tiles). The interface of chapter 04's Split (kCount, kVec, at), so that chapter 04's
/// micro-GEMM (tile_ops.cuh: mma_tile) reads them.
template <int kCount_>
struct Consecutive {
  static constexpr int kCount = kCount_, kVec = 4;
  static_assert(kCount % kVec == 0, "whole float4 runs");
  __host__ __device__ static constexpr int at(int t, int e) { return kCount * t + e; }
};

/// The tile shape, fixed at compile time so that every loop bound and every register array
/// is a constant: d the head dimension, Br query rows and Bc keys per tile.
template <int d_, int Br_, int Bc_>
struct Tiles {
  static constexpr int d = d_, Br = Br_, Bc = Bc_;
  static constexpr int kTM = Br / kGrid;  ///< query rows per thread (score tile, dQ)
  static constexpr int kTN = Bc / kGrid;  ///< keys per thread (score tile columns, dK/dV rows)
  /// The thread's d-columns of dK, dV, dQ (and of the rows of Q, dO, K it multiplies them
  /// with): chapter 04's Split, d/16 columns in runs of up to 4 floats, the 16 threads' runs
  /// side by side, so that the 8 lanes of a warp row read 8 neighbouring runs.
  using Cols = ft::cuda_core::Split<d, kGrid>;
  using Keys = Consecutive<kTN>;          ///< the thread's keys of dK, dV (rows of Pᵀ, dSᵀ)
  static constexpr int kPer = Cols::kCount;  ///< d-columns per thread: 2, 4 or 8
  static constexpr int kLd = d + kPadD;   ///< row stride of Q, dO, K, V in shared memory
  static constexpr int kLdP = Bc + kPadP; ///< row stride of P, dS
  static_assert(Br % kGrid == 0 && Bc % (4 * kGrid) == 0, "whole float4 runs of keys");
  static_assert(d % kGrid == 0, "d: a multiple of 16");
  static_assert(Br <= kThreads, "one thread per query row loads L and D");

  /// K, V (Bc rows), Q, dO (Br rows), dS, L and D, and P unless `with_p` (the
  /// dQ-pass kernel has no use for it). d = 128, 64×64: 168.5 KB; d = 64: 104.5 KB.
  static constexpr size_t smem_bytes(bool with_p) {
    return sizeof(float) * (size_t(2 * Bc + 2 * Br) * kLd + size_t(with_p ? 2 : 1) * Br * kLdP +
                            2 * Br);
  }
  /// Blocks per SM to leave registers for (128 a thread for two, 255 for one): two when two
  /// blocks' shared memory fits in the SM, else one.
  static constexpr int min_blocks(bool with_p) {
    return 2 * (smem_bytes(with_p) + kSmemReservedPerBlock) <= kSmemPerSm ? 2 : 1;
  }
};

/// Where a thread sits in the 16×16 grid. A warp is a 4 (ty) × 8 (tx) patch, not a 2×16
/// strip: loads of Q rows (by ty) then touch 4 rows and loads of K rows (by tx) 8 rows,
/// both within one pass over the 32 banks.
struct ThreadPos {
  int ty, tx;
};
__device__ __forceinline__ ThreadPos thread_pos() {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  return {lane / 8 + 4 * (warp / 2), lane % 8 + 8 * (warp % 2)};
}

/// Pointers into one block's shared memory (layout: Tiles::smem_bytes).
template <class T>
struct Smem {
  float *K, *V, *Q, *dO, *dS, *lse, *D, *P;
  __device__ explicit Smem(float* base) {
    K = base;
    V = K + T::Bc * T::kLd;
    Q = V + T::Bc * T::kLd;
    dO = Q + T::Br * T::kLd;
    dS = dO + T::Br * T::kLd;
    lse = dS + T::Br * T::kLdP;
    D = lse + T::Br;
    P = D + T::Br;  // only when the kernel allocated it
  }
};

// ---- Small loads and stores --------------------------------------------------------------

// The thread's d-columns of a row are read and written with chapter 04's load_fragment and
// store_fragment (tile_ops.cuh), one vector access per run; what chapter 04 has no use for
// follows: a float4 read of four neighbours along a row, and atomic adds.

/// Reads 4 contiguous floats into registers with one float4 load.
__device__ __forceinline__ void load4(float* dst, const float* src) {
  const float4 v = *reinterpret_cast<const float4*>(src);
  dst[0] = v.x, dst[1] = v.y, dst[2] = v.z, dst[3] = v.w;
}

/// Adds W contiguous floats to global memory atomically: one instruction per run on Hopper
/// (float4/float2 atomicAdd, sm_90+), one per float before it.
template <int W>
__device__ __forceinline__ void atomic_add_run(float* dst, const float* v) {
#if __CUDA_ARCH__ >= 900
  if constexpr (W == 4) {
    atomicAdd(reinterpret_cast<float4*>(dst), make_float4(v[0], v[1], v[2], v[3]));
  } else if constexpr (W == 2) {
    atomicAdd(reinterpret_cast<float2*>(dst), make_float2(v[0], v[1]));
  } else  // (the scalar loop below is this else's body on sm_90)
#endif
  {
#pragma unroll
    for (int w = 0; w < W; ++w) atomicAdd(dst + w, v[w]);
  }
}

/// Atomically adds the thread's d-columns of one accumulator row to a row of global memory
/// (store_fragment's layout, one atomic per run on sm_90).
template <class T>
__device__ __forceinline__ void atomic_add_cols(float* row, const float (&v)[T::kPer], int tx) {
  using Cols = typename T::Cols;
#pragma unroll
  for (int e = 0; e < Cols::kCount; e += Cols::kVec)
    atomic_add_run<Cols::kVec>(row + Cols::at(tx, e), v + e);
}

// ---- Copies into shared memory --------------------------------------------------------------
// Copy is CopyAsync (copy_async.cuh: cp.async, every kernel but flash_sync's) or CopySync
// (copy_sync.cuh: plain loads and stores).

/// Starts copying rows [row0, row0 + kRows) of a [N][d] head into shared memory (stride
/// d + 4), 16 bytes a thread at a time, neighbouring threads on neighbouring addresses; rows
/// past N become zeros (a partial last tile), read from nowhere.
template <class T, int kRows, class Copy>
__device__ __forceinline__ void load_tile(float* dst, const float* head, int row0, int N) {
  constexpr int kVecs = T::d / 4;                 // 16-byte pieces per row
  constexpr int kRowsPerPass = kThreads / kVecs;  // rows the block copies per pass: 8 to 32
  static_assert(kThreads % kVecs == 0 && kRows % kRowsPerPass == 0, "whole rows per pass");
  const int c = 4 * (threadIdx.x % kVecs);
#pragma unroll
  for (int r = threadIdx.x / kVecs; r < kRows; r += kRowsPerPass) {
    const bool in = row0 + r < N;
    Copy::copy_16(dst + r * T::kLd + c, in ? head + int64_t(row0 + r) * T::d + c : head, in);
  }
}

/// Starts copying the query tile's per-row statistics: the log-sum-exp L and D (zeros past N).
template <class T, class Copy>
__device__ __forceinline__ void load_row_stats(const Smem<T>& s, const float* lse_head,
                                               const float* D_head, int row0, int N) {
  const int r = threadIdx.x;
  if (r < T::Br) {
    const bool in = row0 + r < N;
    Copy::copy_4(s.lse + r, lse_head + (in ? row0 + r : 0), in);
    Copy::copy_4(s.D + r, D_head + (in ? row0 + r : 0), in);
  }
}

/// Pointers of one backward launch (device memory, [B,H,N,d] / [B,H,N] layouts).
struct BackwardParams {
  const float *Q, *K, *V, *dO, *lse, *D;  ///< inputs; D = rowsum(dO∘O)
  float *dQ, *dK, *dV;                    ///< outputs (dQ zeroed first for the atomic kernel)
  int N;
  bool causal;
  float scale;
};

/// Starts copying what a block needs of query tile q0 of head `head` (its first row):
/// Q, dO, L, D. (The pointers come from the kernel parameters each time: holding them in
/// registers across the loop would cost registers that d = 64 does not have.)
template <class T, class Copy>
__device__ __forceinline__ void load_query_tile(const Smem<T>& s, const BackwardParams& p,
                                                int64_t head, int q0) {
  load_tile<T, T::Br, Copy>(s.Q, p.Q + head * T::d, q0, p.N);
  load_tile<T, T::Br, Copy>(s.dO, p.dO + head * T::d, q0, p.N);
  load_row_stats<T, Copy>(s, p.lse + head, p.D + head, q0, p.N);
}

// ---- The three register-tiled products ---------------------------------------------------
// Every operand sits in shared memory in its natural row-major layout; each product reads it
// along its contiguous dimension with float4 loads.

/// acc[i][j] += A_row(ty+16i) · B_row(tx+16j): S = Q·Kᵀ and dP = dO·Vᵀ, dot products of
/// d-long rows. Per 4-wide step along d: kTM + kTN float4 loads feed 4·kTM·kTN FMAs.
template <class T>
__device__ __forceinline__ void mma_abt(float (&acc)[T::kTM][T::kTN], const float* A,
                                        const float* B, ThreadPos t) {
#pragma unroll 4
  for (int k = 0; k < T::d; k += 4) {
    float a[T::kTM][4], b[T::kTN][4];
#pragma unroll
    for (int i = 0; i < T::kTM; ++i) load4(a[i], A + (t.ty + kGrid * i) * T::kLd + k);
#pragma unroll
    for (int j = 0; j < T::kTN; ++j) load4(b[j], B + (t.tx + kGrid * j) * T::kLd + k);
#pragma unroll
    for (int i = 0; i < T::kTM; ++i)
#pragma unroll
      for (int j = 0; j < T::kTN; ++j)
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) acc[i][j] = fmaf(a[i][kk], b[j][kk], acc[i][j]);
  }
}

/// acc[q][e] += Σ_r A[r][Keys::at(ty, q)] · B[r][Cols::at(tx, e)]: dV += Pᵀ·dO and
/// dK += dSᵀ·Q, a sum over the Br query rows of outer products: chapter 04's micro-GEMM
/// (tile_ops.cuh: mma_tile), A being P or dS stored [Br][kLdP], so that its rows are the
/// columns of Pᵀ or dSᵀ. Per row: kTN/4 float4 of A, d/(16·Cols::kVec) runs of B.
template <class T>
__device__ __forceinline__ void mma_atb(float (&acc)[T::kTN][T::kPer], const float* A,
                                        const float* B, ThreadPos t) {
  ft::cuda_core::mma_tile<T::Br, typename T::Keys, typename T::Cols>(acc, A, T::kLdP, B, T::kLd, t.ty,
                                                            t.tx);
}

/// acc[i][e] += Σ_c A[ty+16i][c] · B[c][Cols::at(tx, e)]: dQ += dS·K, a sum over the Bc keys.
/// Per 4 keys: kTM float4 of dS (one per row) and 4 rows of K.
template <class T>
__device__ __forceinline__ void mma_ab(float (&acc)[T::kTM][T::kPer], const float* A,
                                       const float* B, ThreadPos t) {
#pragma unroll 2
  for (int c = 0; c < T::Bc; c += 4) {
    float a[T::kTM][4];
#pragma unroll
    for (int i = 0; i < T::kTM; ++i) load4(a[i], A + (t.ty + kGrid * i) * T::kLdP + c);
#pragma unroll
    for (int cc = 0; cc < 4; ++cc) {
      float b[T::kPer];
      ft::cuda_core::load_fragment<typename T::Cols>(b, B + (c + cc) * T::kLd, t.tx);
#pragma unroll
      for (int i = 0; i < T::kTM; ++i)
#pragma unroll
        for (int e = 0; e < T::kPer; ++e) acc[i][e] = fmaf(a[i][cc], b[e], acc[i][e]);
    }
  }
}

// ---- Recomputing P and dS ----------------------------------------------------------------

/// The thread's kTM×kTN entries of P and dS for query tile q0 and key tile k0, from the
/// tiles in shared memory: S = Q·Kᵀ, P = exp2(S·scale·log2 e − L·log2 e) (0 where masked:
/// past N, or key > query when causal; never exp of an undefined value), dP = dO·Vᵀ and
/// dS = scale·P∘(dP − D). The scale of dQ = scale·dS·K and dK = scale·dSᵀ·Q is folded into
/// dS here, once per entry instead of once per output.
template <class T>
__device__ __forceinline__ void recompute_p_ds(const Smem<T>& s, ThreadPos t, int q0, int k0,
                                               int N, bool causal, float scale,
                                               float (&P)[T::kTM][T::kTN],
                                               float (&dS)[T::kTM][T::kTN]) {
  float dP[T::kTM][T::kTN];
#pragma unroll
  for (int i = 0; i < T::kTM; ++i)
#pragma unroll
    for (int j = 0; j < T::kTN; ++j) P[i][j] = dP[i][j] = 0.f;
  mma_abt<T>(P, s.Q, s.K, t);    // P holds S = Q·Kᵀ (unscaled) until exponentiated below
  mma_abt<T>(dP, s.dO, s.V, t);  // dP = dO·Vᵀ
  const float scale_log2 = scale * ft::kLog2e;
#pragma unroll
  for (int i = 0; i < T::kTM; ++i) {
    const int r = t.ty + kGrid * i, query = q0 + r;
    const float lse2 = s.lse[r] * ft::kLog2e;  // L in base 2, like S·scale·log2 e
#pragma unroll
    for (int j = 0; j < T::kTN; ++j) {
      const int key = k0 + t.tx + kGrid * j;
      const bool visible = query < N && key < N && (!causal || key <= query);
      P[i][j] = visible ? exp2f(fmaf(P[i][j], scale_log2, -lse2)) : 0.f;
      dS[i][j] = scale * P[i][j] * (dP[i][j] - s.D[r]);
    }
  }
}

/// Stores a micro-tile into a Br×Bc shared-memory tile (P or dS).
template <class T>
__device__ __forceinline__ void store_tile(float* dst, const float (&v)[T::kTM][T::kTN],
                                           ThreadPos t) {
#pragma unroll
  for (int i = 0; i < T::kTM; ++i)
#pragma unroll
    for (int j = 0; j < T::kTN; ++j) dst[(t.ty + kGrid * i) * T::kLdP + t.tx + kGrid * j] = v[i][j];
}

// ---- The kernels ----------------------------------------------------------------------------

/// The body of the three dK/dV kernels. Block = (key tile, head): K_j, V_j stay in shared
/// memory, dK_j and dV_j in registers; for each query tile i (causal: from the tile holding
/// key k0, the first that can see it) recompute P and dS from Q_i, dO_i, L_i, D_i and
/// accumulate. kAtomicDq: also add dS·K_j into dQ_i in device memory with atomics. Copy:
/// how the tiles reach shared memory (CopyAsync, or CopySync for flash_sync).
///
/// Q_i and dO_i are last read by the dV and dK products, so the copy of tile i+1 starts
/// right after them and lands while dQ is being formed: at d = 128 one block fills an SM,
/// and a load nothing overlaps would idle the whole SM (and when one head's key tiles fill
/// the GPU, N = 16384, all 132 blocks walk its query tiles in step and load together). The
/// dK/dV-only kernel has no dQ product to hide the copy behind; for it the copy is simply
/// a load. With CopySync nothing is in flight: the loads of tile i+1 go through registers,
/// and the thread's stores wait for them before dQ can start.
template <class T, bool kAtomicDq, class Copy>
__device__ __forceinline__ void dkdv_block(const BackwardParams& p, float* smem) {
  const Smem<T> s(smem);
  const ThreadPos t = thread_pos();
  const int n_kv = (p.N + T::Bc - 1) / T::Bc, n_q = (p.N + T::Br - 1) / T::Br;
  const int k0 = (int(blockIdx.x) % n_kv) * T::Bc;  // a head's key tiles run side by side,
  const int64_t head = int64_t(blockIdx.x / n_kv) * p.N;  // the longest (causal: k0 = 0) first
  const int i_first = p.causal ? k0 / T::Br : 0;
  load_tile<T, T::Bc, Copy>(s.K, p.K + head * T::d, k0, p.N);
  load_tile<T, T::Bc, Copy>(s.V, p.V + head * T::d, k0, p.N);
  load_query_tile<T, Copy>(s, p, head, i_first * T::Br);

  float dK[T::kTN][T::kPer] = {}, dV[T::kTN][T::kPer] = {};
  for (int i = i_first; i < n_q; ++i) {
    const int q0 = i * T::Br;
    Copy::wait_all();
    __syncthreads();  // tile i is in for everyone; nobody reads the previous dS any more

    float P[T::kTM][T::kTN], dS[T::kTM][T::kTN];
    recompute_p_ds<T>(s, t, q0, k0, p.N, p.causal, p.scale, P, dS);
    store_tile<T>(s.P, P, t);
    store_tile<T>(s.dS, dS, t);
    __syncthreads();

    mma_atb<T>(dV, s.P, s.dO, t);  // dV_j += P_ijᵀ·dO_i
    mma_atb<T>(dK, s.dS, s.Q, t);  // dK_j += dS_ijᵀ·Q_i   (scale is inside dS)
    __syncthreads();               // Q_i, dO_i, L_i, D_i are free: start copying tile i+1
    if (i + 1 < n_q) load_query_tile<T, Copy>(s, p, head, q0 + T::Br);
    if constexpr (kAtomicDq) {     // dQ_i += dS_ij·K_j, summed over key tiles in device memory
      float dQ[T::kTM][T::kPer] = {};
      mma_ab<T>(dQ, s.dS, s.K, t);
#pragma unroll
      for (int r = 0; r < T::kTM; ++r) {
        const int query = q0 + t.ty + kGrid * r;
        if (query < p.N) atomic_add_cols<T>(p.dQ + (head + query) * T::d, dQ[r], t.tx);
      }
    }
  }
#pragma unroll
  for (int q = 0; q < T::kTN; ++q) {  // each key row of dK_j, dV_j is written exactly once
    const int key = k0 + T::Keys::at(t.ty, q);
    if (key < p.N) {
      ft::cuda_core::store_fragment<typename T::Cols>(p.dK + (head + key) * T::d, dK[q], t.tx);
      ft::cuda_core::store_fragment<typename T::Cols>(p.dV + (head + key) * T::d, dV[q], t.tx);
    }
  }
}

/// dK, dV, and dQ by atomicAdd (dQ must be zero on entry). Grid: ceil(N/Bc)·B·H blocks.
template <class T>
__global__ void __launch_bounds__(kThreads, T::min_blocks(true))
    flash_backward_atomic_dq(BackwardParams p) {
  extern __shared__ float4 smem_atomic[];  // float4: 16-byte aligned for the vector accesses
  dkdv_block<T, true, CopyAsync>(p, reinterpret_cast<float*>(smem_atomic));
}

/// flash_backward_atomic_dq with plain loads and stores for every tile (CopySync), variant
/// flash_sync: the same bytes, the same barriers, no copy in flight.
template <class T>
__global__ void __launch_bounds__(kThreads, T::min_blocks(true))
    flash_backward_atomic_dq_sync(BackwardParams p) {
  extern __shared__ float4 smem_atomic_sync[];
  dkdv_block<T, true, CopySync>(p, reinterpret_cast<float*>(smem_atomic_sync));
}

/// dK and dV only (the first kernel of the separate-dQ-pass variant).
template <class T>
__global__ void __launch_bounds__(kThreads, T::min_blocks(true))
    flash_backward_dkdv(BackwardParams p) {
  extern __shared__ float4 smem_dkdv[];
  dkdv_block<T, false, CopyAsync>(p, reinterpret_cast<float*>(smem_dkdv));
}

/// dQ without atomics. Block = (query tile, head): Q_i, dO_i, L_i, D_i stay in shared
/// memory, dQ_i in registers; for each key tile j (causal: up to the diagonal) load K_j,
/// V_j, recompute P and dS (a second time: the dK/dV kernel did it too) and add dS·K_j.
/// Grid: ceil(N/Br)·B·H blocks, the longest (causal: the last query tile) first.
template <class T>
__global__ void __launch_bounds__(kThreads, T::min_blocks(false))
    flash_backward_dq(BackwardParams p) {
  extern __shared__ float4 smem_dq[];
  const Smem<T> s(reinterpret_cast<float*>(smem_dq));
  const ThreadPos t = thread_pos();
  const int n_kv = (p.N + T::Bc - 1) / T::Bc, n_q = (p.N + T::Br - 1) / T::Br;
  const int q0 = (n_q - 1 - int(blockIdx.x) % n_q) * T::Br;
  const int64_t head = int64_t(blockIdx.x / n_q) * p.N;
  load_query_tile<T, CopyAsync>(s, p, head, q0);

  float dQ[T::kTM][T::kPer] = {};
  const int last_query = min(q0 + T::Br, p.N) - 1;
  const int j_end = p.causal ? last_query / T::Bc + 1 : n_kv;  // key tiles a query here sees
  for (int j = 0; j < j_end; ++j) {
    const int k0 = j * T::Bc;
    __syncthreads();  // everyone is done reading the previous K, V, dS
    load_tile<T, T::Bc, CopyAsync>(s.K, p.K + head * T::d, k0, p.N);
    load_tile<T, T::Bc, CopyAsync>(s.V, p.V + head * T::d, k0, p.N);
    CopyAsync::wait_all();  // (the first time also Q_i, dO_i, L_i, D_i)
    __syncthreads();

    float P[T::kTM][T::kTN], dS[T::kTM][T::kTN];
    recompute_p_ds<T>(s, t, q0, k0, p.N, p.causal, p.scale, P, dS);
    store_tile<T>(s.dS, dS, t);
    __syncthreads();
    mma_ab<T>(dQ, s.dS, s.K, t);  // dQ_i += dS_ij·K_j   (scale is inside dS)
  }
#pragma unroll
  for (int r = 0; r < T::kTM; ++r) {
    const int query = q0 + t.ty + kGrid * r;
    if (query < p.N) ft::cuda_core::store_fragment<typename T::Cols>(p.dQ + (head + query) * T::d, dQ[r], t.tx);
  }
}

}  // namespace ch05
