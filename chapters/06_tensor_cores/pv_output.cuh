/// @file pv_output.cuh
/// @brief Kernel 3 of 3: O = P·V on the tensor cores. A block owns 128 query rows of one
/// head (8 warps of 16 rows) and walks the keys 64 at a time: the P tile (the A operand,
/// P's rows as stored, ldmatrix) and the V tile (the B operand, V's rows transposed on the
/// way by ldmatrix.trans) are copied with cp.async into one of two buffers while the
/// tensor cores work on the other. Causal: key tiles past the query tile's last row are
/// skipped (P is zero there).
#pragma once

#include <cstdint>

#include "06_tensor_cores/tensor_cores.hpp"
#include "sm80/cp_async.cuh"
#include "sm80/ldmatrix.cuh"
#include "sm80/mma.cuh"
#include "sm80/pack.cuh"

namespace ch06 {

using ft::tc::FragA;
using ft::tc::FragB;
using ft::tc::FragC;

/// 8 warps, warp w owning query rows 16w to 16w+15 of the block's 128 and all d columns of
/// O (d/8 accumulator tiles: 64 floats a lane at d = 128).
constexpr int kPvWarps = 8;
constexpr int kPvThreads = kPvWarps * ft::tc::kLanes;
constexpr int kPvStages = 2;  ///< P/V buffers: tile j+1 is copied while tile j is computed
static_assert(kPvWarps * ft::tc::kMmaM == kPvRows, "one 16-row mma tile per warp");
static_assert(kPvRows % kPvKeys == 0, "a query tile ends on a key-tile boundary (causal)");

/// Where one stage's P tile ([128][64]) and V tile ([64][D]) sit in shared memory.
template <int D>
struct PvLayout {
  using PTile = ft::tc::SwizzledTile<kPvKeys>;
  using VTile = ft::tc::SwizzledTile<D>;
  static constexpr int kPElems = kPvRows * PTile::kRowStride;
  static constexpr int kStageElems = kPElems + kPvKeys * VTile::kRowStride;
  /// 48 KB at d = 64, 64 KB at d = 128.
  static constexpr size_t kSmemBytes = size_t(kPvStages) * kStageElems * ft::tc::kElemBytes;
};

template <class T>
struct PvParams {
  const T* P;       ///< the grid, [B·H][N][p_ld]
  int p_ld;         ///< elements of P from one row to the next
  const T* V;
  T* O;
  int N;
  int num_q_tiles;  ///< ⌈N / 128⌉
  bool causal;
};

/// Starts copying rows [q0, q0 + 128) and keys [k0, k0 + 64) of one head's P into a shared
/// tile: 8 chunks of 16 bytes a row. Thread t always copies chunk t % 8 of rows t / 8,
/// t / 8 + 32, +64, +96, so one source and one destination pointer, stepped by fixed strides,
/// serve all four (rows 32 apart share their swizzle). Rows past N, and chunks that start at
/// or past N (the grid's rows end at ld, the next multiple of 8), become zeros.
template <class T>
__device__ __forceinline__ void copy_p_tile_async(T* tile, const T* P, int q0, int k0, int N,
                                                  int p_ld) {
  using PTile = ft::tc::SwizzledTile<kPvKeys>;
  constexpr int kChunksPerRow = kPvKeys / ft::tc::kChunkElems;  // 8
  constexpr int kRowsPerPass = kPvThreads / kChunksPerRow;       // 32
  static_assert(kPvRows % kRowsPerPass == 0 && kRowsPerPass % ft::tc::kSwizzleRows == 0,
                "whole passes, and one swizzled offset for all of a thread's rows");
  const int r0 = int(threadIdx.x) / kChunksPerRow;
  const int c = int(threadIdx.x) % kChunksPerRow * ft::tc::kChunkElems;
  const bool column_inside = k0 + c < N;
  const T* from = P + int64_t(q0 + r0) * p_ld + k0 + c;
  T* to = tile + PTile::offset(r0, c);
#pragma unroll
  for (int it = 0; it < kPvRows / kRowsPerPass; ++it) {
    const bool inside = column_inside && q0 + r0 + it * kRowsPerPass < N;
    // Outside, nothing is read (0 source bytes), from P's first element, which exists.
    ft::tc::cp_async_16(to + it * kRowsPerPass * PTile::kRowStride,
                        inside ? from + int64_t(it) * kRowsPerPass * p_ld : P, inside);
  }
}

// __launch_bounds__(256, 2): two blocks an SM (64 KB of shared memory each at d = 128).
template <class T, int D>
__global__ void __launch_bounds__(kPvThreads, 2) pv_output_tc(const PvParams<T> p) {
  using L = PvLayout<D>;
  extern __shared__ uint4 smem_pv[];  // 16-byte aligned for cp.async and ldmatrix
  T* const buffers = reinterpret_cast<T*>(smem_pv);

  // Last query tile first: under the causal mask it has the most key tiles, and starting
  // the longest blocks first keeps the last wave short (chapter 04).
  const int q0 = (p.num_q_tiles - 1 - int(blockIdx.x % p.num_q_tiles)) * kPvRows;
  const int64_t head = blockIdx.x / p.num_q_tiles;  // b·H + h
  const int N = p.N;
  const T* P = p.P + head * N * p.p_ld;
  const T* V = p.V + head * N * D;
  const int kv_end = p.causal ? min(N, q0 + kPvRows) : N;  // causal: no key past the tile's last query
  const int num_kv_tiles = (kv_end + kPvKeys - 1) / kPvKeys;

  auto load = [&](int j) {  // key tile j into buffer j % 2, one cp.async group
    T* Ps = buffers + (j % kPvStages) * L::kStageElems;
    copy_p_tile_async(Ps, P, q0, j * kPvKeys, N, p.p_ld);
    ft::tc::copy_tile_async<typename L::VTile, kPvKeys, kPvThreads>(Ps + L::kPElems, V, j * kPvKeys, N);
    ft::tc::cp_async_commit();
  };

  const int warp = threadIdx.x / ft::tc::kLanes, lane = ft::tc::lane_id();
  const int wr = warp * ft::tc::kMmaM;  // this warp's first row in the tile
  constexpr int kOTiles = D / ft::tc::kMmaN;
  FragC o[kOTiles] = {};

  load(0);
  for (int j = 0; j < num_kv_tiles; ++j) {
    if (j + 1 < num_kv_tiles) {  // tile j+1 flies while tile j is computed
      load(j + 1);
      ft::tc::cp_async_wait<1>();  // all but the newest group (tile j+1) have landed
    } else {
      ft::tc::cp_async_wait<0>();
    }
    __syncthreads();  // tile j is in shared memory for every warp
    const T* Ps = buffers + (j % kPvStages) * L::kStageElems;
    const T* Vs = Ps + L::kPElems;
    // O += P·V over the tile's 64 keys, 16 at a time: A = P[16 rows][16 keys] as stored;
    // B = V[16 keys][16 columns], two 8-column fragments per ldmatrix.x4.trans.
#pragma unroll
    for (int kk = 0; kk < kPvKeys / ft::tc::kMmaK; ++kk) {
      FragA a;
      ft::tc::load_a<typename L::PTile>(a, Ps, wr, kk * ft::tc::kMmaK);
#pragma unroll
      for (int ot = 0; ot < kOTiles; ot += 2) {
        FragB b[2];
        ft::tc::load_b_trans_x4<typename L::VTile>(b, Vs, kk * ft::tc::kMmaK, ot * ft::tc::kMmaN);
        ft::tc::mma_m16n8k16<T>(o[ot], a, b[0]);
        ft::tc::mma_m16n8k16<T>(o[ot + 1], a, b[1]);
      }
    }
    __syncthreads();  // every warp is done with this buffer before it is refilled
  }

  // O in the dtype, two neighbouring columns per 32-bit store; P was normalized already.
  T* O = p.O + head * N * D;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = q0 + wr + h * ft::tc::kBlock + ft::tc::lane_group(lane);
    if (row >= N) continue;
#pragma unroll
    for (int ot = 0; ot < kOTiles; ++ot) {
      const int col = ot * ft::tc::kMmaN + 2 * ft::tc::lane_in_group(lane);
      *reinterpret_cast<uint32_t*>(O + int64_t(row) * D + col) =
          ft::tc::pack2<T>(o[ot].c[2 * h], o[ot].c[2 * h + 1]);
    }
  }
}

}  // namespace ch06
