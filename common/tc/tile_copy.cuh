/// @file tile_copy.cuh
/// @brief A tile of rows from device memory into a shared tile of any layout (tc/swizzle.hpp)
/// with plain 16-byte loads and stores: the synchronous twin of tc::copy_tile_async
/// (tc/cp_async.cuh), for the kernels that copy first and compute after a barrier; and the
/// way back, a shared tile into rows of device memory in the same 16-byte chunks.
#pragma once

#include <cstdint>

#include "tc/swizzle.hpp"

namespace ft::tc {

/// Which 16-byte chunks of a tile of Tile::kCols columns a thread moves when THREADS threads
/// share it: consecutive threads take consecutive chunks of a row (coalesced in device
/// memory), and each thread keeps one column of chunks, rows r0, r0 + kRowsPerPass, ...
template <class Tile, int ROWS, int THREADS>
struct ChunkColumn {
  static constexpr int kChunksPerRow = Tile::kCols / kChunkElems;
  static_assert(THREADS % kChunksPerRow == 0, "every thread keeps one column of chunks");
  static constexpr int kRowsPerPass = THREADS / kChunksPerRow;
  static_assert(ROWS % kRowsPerPass == 0, "every thread moves the same count");
  static constexpr int kPasses = ROWS / kRowsPerPass;
  int r0 = int(threadIdx.x) / kChunksPerRow;                ///< the thread's first row
  int col = int(threadIdx.x) % kChunksPerRow * kChunkElems;  ///< its column (elements)
};

/// Rows [row0, row0 + ROWS) of a row-major [N][Tile::kCols] matrix into `tile`; rows at or
/// past N become zeros (a partial last tile). THREADS threads share the 16-byte chunks as
/// ChunkColumn says, as in tc::copy_tile_async.
template <class Tile, int ROWS, int THREADS, class T>
__device__ __forceinline__ void copy_tile_sync(T* tile, const T* src, int row0, int N) {
  const ChunkColumn<Tile, ROWS, THREADS> at;
#pragma unroll
  for (int it = 0; it < at.kPasses; ++it) {
    const int r = at.r0 + it * at.kRowsPerPass;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (row0 + r < N) v = *reinterpret_cast<const uint4*>(src + int64_t(row0 + r) * Tile::kCols + at.col);
    *reinterpret_cast<uint4*>(tile + Tile::offset(r, at.col)) = v;
  }
}

/// The way back: `tile` (layout Tile) into rows [row0, row0 + ROWS) of a row-major
/// [N][Tile::kCols] matrix, rows at or past N not written. The same chunks per thread as
/// copy_tile_sync: each warp writes whole rows of device memory, 16 bytes a lane.
template <class Tile, int ROWS, int THREADS, class T>
__device__ __forceinline__ void store_tile_sync(T* dst, const T* tile, int row0, int N) {
  const ChunkColumn<Tile, ROWS, THREADS> at;
#pragma unroll
  for (int it = 0; it < at.kPasses; ++it) {
    const int r = at.r0 + it * at.kRowsPerPass;
    if (row0 + r < N)
      *reinterpret_cast<uint4*>(dst + int64_t(row0 + r) * Tile::kCols + at.col) =
          *reinterpret_cast<const uint4*>(tile + Tile::offset(r, at.col));
  }
}

}  // namespace ft::tc
