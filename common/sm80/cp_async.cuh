/// @file cp_async.cuh
/// @brief `cp.async.cg.shared.global` (sm_80+): copies 16 bytes from device memory into shared
/// memory without passing through registers, while the thread goes on; and the group
/// bookkeeping that says when the copies have landed.
///
/// A thread's copies form groups: every cp.async issued since the last commit belongs to the
/// group that cp_async_commit() closes. cp_async_wait<N>() returns when at most the N most
/// recent groups are still in flight, so with two tiles in flight (double buffering)
/// wait<1> means "the older tile is here". That is per thread: a __syncthreads() after the
/// wait makes every thread's copies visible to the whole block.
#pragma once

#include <cstdint>

#include "sm80/ldmatrix.cuh"  // shared_address
#include "core/strides.hpp"  // ft::ContiguousRows
#include "sm80/swizzle.hpp"

namespace ft::tc {

/// Starts copying 16 bytes from `src` to `dst`, or, when !in_range, writes 16 zero bytes
/// there: the src-size operand says how many bytes to read (16 or 0) and cp.async fills the
/// rest of the 16 with zeros. .cg caches in L2 only: a tile is read from device memory once.
/// Both addresses 16-byte aligned. Pass a valid `src` even when !in_range: the PTX ISA does
/// not promise that an address it reads nothing from is never checked.
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool in_range) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // sm_80; never reached on older GPUs (see sm80/mma.cuh)
#else
  const int src_bytes = in_range ? kChunkBytes : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
               ::"r"(shared_address(dst)), "l"(src), "r"(src_bytes));
#endif
}

/// The same for 4 bytes (one float: the per-row statistics L and D, whose rows need not be
/// 16-byte aligned); .ca, the only cache mode cp.async has for copies under 16 bytes.
__device__ __forceinline__ void cp_async_4(void* dst, const void* src, bool in_range) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();
#else
  const int src_bytes = in_range ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
               ::"r"(shared_address(dst)), "l"(src), "r"(src_bytes));
#endif
}

/// Closes the current group of this thread's copies.
__device__ __forceinline__ void cp_async_commit() {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

/// Waits until at most N of this thread's most recent groups are still in flight.
/// "memory": the compiler must not move shared-memory reads above the wait.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

/// r·ld as a 64-bit offset: one mul.wide.s32 at each use, written in PTX so that the
/// optimizer cannot split the product and hoist parts of it out of the caller's loop into
/// registers. A precaution: in the one build compared (an earlier version of the backward's
/// kernels that always read strides, at the 255-register limit) the plain product
/// `int64_t(r) * ld` gave the same registers and spills; the views' kernels were measured
/// with this form.
__device__ __forceinline__ int64_t row_offset(int r, int ld) {
  int64_t off;
  asm("mul.wide.s32 %0, %1, %2;" : "=l"(off) : "r"(r), "r"(ld));
  return off;
}

/// Starts copying rows [row0, row0 + ROWS) of a row-major [N][Tile::kCols] matrix into a
/// shared tile of layout Tile; rows at or past N become zeros (a partial last tile). THREADS
/// threads share the chunks: consecutive threads take consecutive chunks of a row, so a
/// warp reads whole rows of device memory (coalesced) and, the swizzle permuting chunks only
/// within a row, writes 8 different bank groups per 8 lanes. Call cp_async_commit() after.
///
/// Each thread copies the same column of rows r0, r0 + kRowsPerPass, ...: one source pointer,
/// stepped by compile-time strides (immediate offsets in the instructions), rather than an
/// address per chunk, which costs the kernels that call this two registers per chunk (16
/// chunks a tile: 32 registers) held across the whole K/V loop.
template <class Tile, int ROWS, int THREADS, class T>
__device__ __forceinline__ void copy_tile_async(T* tile, const T* src, int row0, int N) {
  constexpr int kChunksPerRow = Tile::kCols / kChunkElems;
  static_assert(THREADS % kChunksPerRow == 0, "every thread keeps one column of chunks");
  constexpr int kRowsPerPass = THREADS / kChunksPerRow;
  static_assert(ROWS % kRowsPerPass == 0, "every thread copies the same count");
  const int r0 = threadIdx.x / kChunksPerRow, col = threadIdx.x % kChunksPerRow * kChunkElems;
  const T* from = src + int64_t(row0 + r0) * Tile::kCols + col;
  const bool whole_tile = row0 + ROWS <= N;  // no row past N: no test per chunk
#pragma unroll
  for (int it = 0; it < ROWS / kRowsPerPass; ++it) {
    const int r = r0 + it * kRowsPerPass;
    // A row past N reads nothing (0 source bytes); its source address is row 0's, which exists.
    const bool inside = whole_tile || row0 + r < N;
    cp_async_16(tile + Tile::offset(r, col), inside ? from + it * kRowsPerPass * Tile::kCols : src,
                inside);
  }
}

/// copy_tile_async from a view whose rows are `ld` elements apart (strides.hpp).
template <class Tile, int ROWS, int THREADS, class T>
__device__ __forceinline__ void copy_tile_async(T* tile, const T* src, int row0, int N, int ld) {
  constexpr int kChunksPerRow = Tile::kCols / kChunkElems;
  constexpr int kRowsPerPass = THREADS / kChunksPerRow;
  static_assert(THREADS % kChunksPerRow == 0 && ROWS % kRowsPerPass == 0,
                "every thread copies the same column of chunks, the same count");
  const int r0 = threadIdx.x / kChunksPerRow, col = threadIdx.x % kChunksPerRow * kChunkElems;
#pragma unroll
  for (int it = 0; it < ROWS / kRowsPerPass; ++it) {
    const int r = r0 + it * kRowsPerPass;
    const bool inside = row0 + r < N;
    cp_async_16(tile + Tile::offset(r, col), inside ? src + row_offset(row0 + r, ld) + col : src, inside);
  }
}

/// A contiguous tensor's rows (ft::ContiguousRows): the copy above without a stride, the
/// code the chapters' measured kernels compile from.
template <class Tile, int ROWS, int THREADS, class T>
__device__ __forceinline__ void copy_tile_async(T* tile, const T* src, int row0, int N, ContiguousRows) {
  copy_tile_async<Tile, ROWS, THREADS>(tile, src, row0, N);
}

/// copy_tile_async for a kernel that copies such a tile at every step of its loop (chapter
/// 08's query tiles): the thread's offsets computed once, when it is constructed, and a whole
/// tile copied without a test per chunk. Then a chunk costs one cp.async whose addresses are
/// the thread's first ones plus constants, where copy_tile_async recomputes each chunk's
/// place in the (swizzled) tile and selects its source pointer on a test. A pass must cover
/// whole swizzle periods (8 rows), so that a chunk's place is the first one's plus a constant.
/// (chapters 06 and 07 keep copy_tile_async: their measured kernels are compiled from it.)
template <class Tile, int ROWS, int THREADS>
struct TileCopy {
  static constexpr int kChunksPerRow = Tile::kCols / kChunkElems;
  static constexpr int kRowsPerPass = THREADS / kChunksPerRow;
  static_assert(THREADS % kChunksPerRow == 0 && ROWS % kRowsPerPass == 0,
                "every thread copies the same column of chunks, the same count");
  static_assert(kRowsPerPass % kSwizzleRows == 0, "passes of whole swizzle periods");
  int row;  ///< the thread's first row in the tile
  int src;  ///< its first chunk's offset (elements) from the start of the tile's first row
  int dst;  ///< ... and in the tile
  __device__ TileCopy()
      : row(int(threadIdx.x) / kChunksPerRow),
        src(row * Tile::kCols + int(threadIdx.x) % kChunksPerRow * kChunkElems),
        dst(Tile::offset(row, int(threadIdx.x) % kChunksPerRow * kChunkElems)) {}

  /// Starts copying rows [row0, row0 + ROWS) of the row-major [N][Tile::kCols] matrix M into
  /// `tile`; rows at or past N become zeros. Call cp_async_commit() after.
  template <class T>
  __device__ __forceinline__ void operator()(T* tile, const T* M, int row0, int N) const {
    constexpr int kSrcStep = kRowsPerPass * Tile::kCols, kDstStep = kRowsPerPass * Tile::kRowStride;
    const T* from = M + int64_t(row0) * Tile::kCols + src;
    T* to = tile + dst;
    if (row0 + ROWS <= N) {
#pragma unroll
      for (int it = 0; it < ROWS / kRowsPerPass; ++it) cp_async_16(to + it * kDstStep, from + it * kSrcStep, true);
    } else {
#pragma unroll
      for (int it = 0; it < ROWS / kRowsPerPass; ++it) {
        const bool inside = row0 + row + it * kRowsPerPass < N;  // else: zeros, M's row 0 named
        cp_async_16(to + it * kDstStep, inside ? from + it * kSrcStep : M, inside);
      }
    }
  }

  /// A contiguous tensor's rows (ft::ContiguousRows): the copy above.
  template <class T>
  __device__ __forceinline__ void operator()(T* tile, const T* M, int row0, int N, ContiguousRows) const {
    (*this)(tile, M, row0, N);
  }

  /// The same for a view whose rows are `ld` elements apart (strides.hpp). The sources are
  /// no longer the first one plus constants: chunk it's is M + (row0 + row + it·kRowsPerPass)
  /// ·ld + its column, the product formed afresh for each chunk (row_offset), so that nothing
  /// per chunk is held across the caller's loop.
  template <class T>
  __device__ __forceinline__ void operator()(T* tile, const T* M, int row0, int N, int ld) const {
    constexpr int kDstStep = kRowsPerPass * Tile::kRowStride;
    const T* from = M + (src - row * Tile::kCols);  // the thread's column of row 0
    T* to = tile + dst;
#pragma unroll
    for (int it = 0; it < ROWS / kRowsPerPass; ++it) {
      const int r = row0 + row + it * kRowsPerPass;
      const bool inside = r < N;  // else: zeros, M's row 0 named
      cp_async_16(to + it * kDstStep, inside ? from + row_offset(r, ld) : M, inside);
    }
  }
};

}  // namespace ft::tc
