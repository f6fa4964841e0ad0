/// @file qk_scores.cuh
/// @brief Kernel 1 of 3: S = scale·Q·Kᵀ on the tensor cores. A block computes one 128×128
/// tile of one head's S from a 128-row tile of Q and one of K in shared memory (swizzled,
/// copied with cp.async), with ldmatrix and mma.sync, and writes the float32 accumulators to
/// the grid in device memory as float32 or rounded to the dtype, through a staging tile in
/// shared memory so that the stores to the grid are 16 bytes a lane and whole rows a warp.
#pragma once

#include <cstdint>
#include <type_traits>

#include "06_tensor_cores/tensor_cores.hpp"
#include "sm80/cp_async.cuh"
#include "sm80/ldmatrix.cuh"
#include "sm80/mma.cuh"
#include "sm80/pack.cuh"

namespace ch06 {

using ft::tc::FragA;
using ft::tc::FragB;
using ft::tc::FragC;

/// 8 warps share a tile, as a 4 × 2 grid of warps: warp w owns rows 32·(w/2) to +31 and
/// columns 64·(w%2) to +63 of it, so each A fragment (16 rows of Q) it loads serves 8 mma
/// and each pair of B fragments (16 keys) serves 4.
constexpr int kScoreWarps = 8;
constexpr int kScoreThreads = kScoreWarps * ft::tc::kLanes;
constexpr int kScoreWarpRows = 32;
constexpr int kScoreWarpCols = 64;
constexpr int kScoreWarpGridCols = kScoreTile / kScoreWarpCols;  // 2 warps side by side
constexpr int kScoreMTiles = kScoreWarpRows / ft::tc::kMmaM;     // 2 16-row tiles a warp
constexpr int kScoreNTiles = kScoreWarpCols / ft::tc::kMmaN;     // 8 8-key tiles a warp
static_assert(kScoreWarps * kScoreWarpRows * kScoreWarpCols == kScoreTile * kScoreTile,
              "the warps cover the tile exactly");

/// Shared memory: the Q tile and the K tile, 128 rows of d each (64 KB at d = 128), and
/// afterwards, over them, the staged S tile (ScoreStage: 34 KB in bf16/fp16, 68 KB in
/// float32). The larger of the two: 34, 68, 64 and 68 KB for d = 64, 128 × bf16, float32 S.
template <int D, class Score>
constexpr size_t scores_smem_bytes() {
  const size_t tiles = 2 * size_t(ft::tc::tile_bytes<ft::tc::SwizzledTile<D>>(kScoreTile));
  const size_t stage = size_t(score_stage_bytes(int(sizeof(Score))));
  return tiles > stage ? tiles : stage;
}

template <class T, class Score>
struct ScoresParams {
  const T* Q;
  const T* K;
  Score* S;             ///< the grid, [B·H][N][ld]
  int N;
  int ld;               ///< grid_row_stride(N)
  int tiles;            ///< ⌈N / 128⌉: tiles along each side of one head's S
  int tiles_per_head;   ///< tiles², or, causal, tiles·(tiles + 1)/2 (on or below the diagonal)
  bool causal;
  float scale;
};

/// Tile number t of one head, row of tiles by row of tiles: (qt, kt). Causal, only the
/// tiles with kt ≤ qt exist, and row qt starts at tile qt·(qt+1)/2; the square root guesses
/// qt, and the two corrections absorb its float rounding.
__device__ __forceinline__ void score_tile(int t, int tiles, bool causal, int& qt, int& kt) {
  if (!causal) {
    qt = t / tiles, kt = t % tiles;
    return;
  }
  qt = int((sqrtf(8.f * float(t) + 1.f) - 1.f) * 0.5f);
  if (int64_t(qt + 1) * (qt + 2) / 2 <= t) ++qt;
  if (int64_t(qt) * (qt + 1) / 2 > t) --qt;
  kt = int(t - int64_t(qt) * (qt + 1) / 2);
}

/// Two neighbouring columns of one row of S (in the staging tile), as float32 (8 bytes) or
/// packed (4 bytes).
template <class Score>
__device__ __forceinline__ void store_pair(Score* at, float lo, float hi) {
  if constexpr (std::is_same_v<Score, float>)
    *reinterpret_cast<float2*>(at) = make_float2(lo, hi);
  else
    *reinterpret_cast<uint32_t*>(at) = ft::tc::pack2<Score>(lo, hi);
}

// __launch_bounds__(256, 2): at most 128 registers a thread, so two blocks share an SM and
// one block's stores overlap the other's loads and products.
template <class T, class Score, int D>
__global__ void __launch_bounds__(kScoreThreads, 2) qk_scores_tc(const ScoresParams<T, Score> p) {
  using Tile = ft::tc::SwizzledTile<D>;
  extern __shared__ uint4 smem_scores[];  // uint4: 16-byte aligned for cp.async and ldmatrix
  T* Qs = reinterpret_cast<T*>(smem_scores);  // [128][D]
  T* Ks = Qs + kScoreTile * Tile::kRowStride;  // [128][D]

  const int64_t head = blockIdx.x / p.tiles_per_head;  // b·H + h
  int qt, kt;
  score_tile(int(blockIdx.x % p.tiles_per_head), p.tiles, p.causal, qt, kt);
  const int N = p.N, q0 = qt * kScoreTile, k0 = kt * kScoreTile;

  // Both tiles in one cp.async group; rows past N arrive as zeros (their scores are 0 and
  // are never stored past column ld, never read past column N).
  ft::tc::copy_tile_async<Tile, kScoreTile, kScoreThreads>(Qs, p.Q + head * N * D, q0, N);
  ft::tc::copy_tile_async<Tile, kScoreTile, kScoreThreads>(Ks, p.K + head * N * D, k0, N);
  ft::tc::cp_async_commit();
  ft::tc::cp_async_wait<0>();
  __syncthreads();

  const int warp = threadIdx.x / ft::tc::kLanes, lane = ft::tc::lane_id();
  const int wr = warp / kScoreWarpGridCols * kScoreWarpRows;  // this warp's rows in the tile
  const int wc = warp % kScoreWarpGridCols * kScoreWarpCols;  // and columns
  FragC acc[kScoreMTiles][kScoreNTiles] = {};

  // The k-loop over d, 16 at a time: A = 16 rows of Q (ldmatrix.x4), B = Kᵀ for 16 keys,
  // two 8-key fragments in one ldmatrix.x4 from K's rows (no transpose: sm80/fragment.hpp).
#pragma unroll
  for (int ks = 0; ks < D / ft::tc::kMmaK; ++ks) {
    FragA a[kScoreMTiles];
#pragma unroll
    for (int mt = 0; mt < kScoreMTiles; ++mt)
      ft::tc::load_a<Tile>(a[mt], Qs, wr + mt * ft::tc::kMmaM, ks * ft::tc::kMmaK);
#pragma unroll
    for (int nt = 0; nt < kScoreNTiles; nt += 2) {
      FragB b[2];
      ft::tc::load_b_x4<Tile>(b, Ks, wc + nt * ft::tc::kMmaN, ks * ft::tc::kMmaK);
#pragma unroll
      for (int mt = 0; mt < kScoreMTiles; ++mt) {
        ft::tc::mma_m16n8k16<T>(acc[mt][nt], a[mt], b[0]);
        ft::tc::mma_m16n8k16<T>(acc[mt][nt + 1], a[mt], b[1]);
      }
    }
  }

  // The tile to the grid, scaled, in two steps through shared memory (the Q and K tiles'
  // space, once every warp is done with them). Lane l holds rows l/4 and l/4 + 8 of each
  // 16×8 accumulator, columns 2·(l%4) and +1: stored straight to the grid, a warp's store
  // would cover 8 rows × 16 bytes (bf16) or 32 bytes (float32), a piece of a sector each.
  // 1. Each lane puts its pairs into the staging tile, scaled and converted. One store of
  //    the warp covers 8 rows × one or two 16-byte chunks; row r of ScoreStage starts r
  //    (bf16) or 2r (float32) bank groups further on, so they land in 8 different groups:
  //    no conflict (test_ledger.cpp counts it).
  __syncthreads();
  Score* St = reinterpret_cast<Score*>(smem_scores);  // ScoreStage: [128][128 + 8]
#pragma unroll
  for (int mt = 0; mt < kScoreMTiles; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = wr + mt * ft::tc::kMmaM + h * ft::tc::kBlock + ft::tc::lane_group(lane);
#pragma unroll
      for (int nt = 0; nt < kScoreNTiles; ++nt) {
        const int c = wc + nt * ft::tc::kMmaN + 2 * ft::tc::lane_in_group(lane);
        store_pair(St + ScoreStage::offset(r, c), acc[mt][nt].c[2 * h] * p.scale,
                   acc[mt][nt].c[2 * h + 1] * p.scale);
      }
    }
  __syncthreads();

  // 2. The staged tile to the grid in 16-byte chunks, row by row (score_chunk): a warp
  //    stores whole 256- or 512-byte rows of the tile, 8 or 16 chunks a thread. As before,
  //    rows only below N, columns up to ld (N..ld-1 are zeros from the zero-filled K rows;
  //    ld is a multiple of 8, so a chunk is wholly in or wholly out).
  constexpr int kBytes = int(sizeof(Score));
  constexpr int kChunks = kScoreTile * kScoreTile / score_chunk_elems(kBytes);
  static_assert(kChunks % kScoreThreads == 0, "every thread stores the same count");
  Score* S = p.S + head * N * p.ld;
#pragma unroll
  for (int it = 0; it < kChunks / kScoreThreads; ++it) {
    const ft::tc::RowCol rc = score_chunk(kBytes, it * kScoreThreads + int(threadIdx.x));
    const int row = q0 + rc.row, col = k0 + rc.col;
    if (row < N && col < p.ld)
      *reinterpret_cast<uint4*>(S + int64_t(row) * p.ld + col) =
          *reinterpret_cast<const uint4*>(St + ScoreStage::offset(rc.row, rc.col));
  }
}

}  // namespace ch06
