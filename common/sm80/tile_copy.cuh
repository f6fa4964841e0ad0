/// @file tile_copy.cuh
/// @brief A tile of rows from device memory into a shared tile of any layout (sm80/swizzle.hpp)
/// with plain 16-byte loads and stores: the synchronous twin of tc::copy_tile_async
/// (sm80/cp_async.cuh), for the kernels that copy first and compute after a barrier.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/strides.hpp"  // ft::ContiguousRows
#include "sm80/swizzle.hpp"

namespace ft::tc {

/// How a kernel brings its next tile into shared memory: the two kinds its traits choose from.
enum class Copy {
  kSync,   ///< plain 16-byte loads and stores (copy_tile_sync), then a barrier: there, then used
  kAsync,  ///< cp.async (copy_tile_async) into a second buffer while the current one is used
};

/// Rows [row0, row0 + ROWS) of a row-major matrix into `tile`, its rows `ld` elements apart:
/// ft::ContiguousRows for the contract's [N][Tile::kCols] (the stride a constant, as the
/// chapters' measured kernels compile it), or an int for a view (strides.hpp). Rows at or
/// past N become zeros (a partial last tile). THREADS threads share the 16-byte chunks,
/// consecutive threads taking consecutive chunks of a row (coalesced reads); each thread
/// keeps one column of chunks, as in tc::copy_tile_async.
template <class Tile, int ROWS, int THREADS, class T, class Ld = ContiguousRows>
__device__ __forceinline__ void copy_tile_sync(T* tile, const T* src, int row0, int N, Ld ld = {}) {
  constexpr int kChunksPerRow = Tile::kCols / kChunkElems;
  static_assert(THREADS % kChunksPerRow == 0, "every thread keeps one column of chunks");
  constexpr int kRowsPerPass = THREADS / kChunksPerRow;
  static_assert(ROWS % kRowsPerPass == 0, "every thread copies the same count");
  const int r0 = threadIdx.x / kChunksPerRow, col = threadIdx.x % kChunksPerRow * kChunkElems;
#pragma unroll
  for (int it = 0; it < ROWS / kRowsPerPass; ++it) {
    const int r = r0 + it * kRowsPerPass;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (row0 + r < N) {
      if constexpr (std::is_same_v<Ld, ContiguousRows>)
        v = *reinterpret_cast<const uint4*>(src + int64_t(row0 + r) * Tile::kCols + col);
      else
        v = *reinterpret_cast<const uint4*>(src + int64_t(row0 + r) * ld + col);
    }
    *reinterpret_cast<uint4*>(tile + Tile::offset(r, col)) = v;
  }
}

}  // namespace ft::tc
