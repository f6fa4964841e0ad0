/// @file ldmatrix.cuh
/// @brief `ldmatrix.sync.aligned.m8n8.{x2,x4}{.trans}.shared.b16`: a warp loads 8×8 matrices
/// of 16-bit elements from shared memory straight into mma fragments (sm_75+; used on sm_80+),
/// and the loaders that point each lane at its row of a Q, K or V tile; and `stmatrix` (sm_90),
/// the same matrices stored back.
///
/// Who hands in which row address, and who receives which elements, is drawn and computed in
/// sm80/fragment.hpp (ldmatrix_src_*, ldmatrix_received); sm80/swizzle.hpp says where a row is.
/// Blocks are one-dimensional (threadIdx.x only), so a lane is threadIdx.x % 32.
#pragma once

#include <cstdint>

#include "sm80/fragment.hpp"
#include "sm80/swizzle.hpp"

namespace ft::tc {

__device__ __forceinline__ int lane_id() { return threadIdx.x % kLanes; }

/// The 32-bit shared-memory address the PTX `.shared` forms take.
__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// The four forms. `row` is this lane's row address. volatile: the compiler keeps each load
// where it is relative to the __syncthreads() that makes the tile ready.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(shared_address(row)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(shared_address(row)));
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1]) : "r"(shared_address(row)));
}
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t (&r)[2], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1]) : "r"(shared_address(row)));
}

/// ldmatrix_x4's inverse, `stmatrix.sync.aligned.m8n8.x4.shared.b16` (sm_90 only): the warp
/// stores four 8×8 matrices of 16-bit elements, register q of lane l its pair of matrix q (row
/// l/4, columns 2·(l%4) and + 1: the fragment layout ldmatrix delivers), to the rows lanes 8q
/// to 8q + 7 hand in, 16 bytes each, 16-byte aligned. One instruction where a lane's 16 bytes
/// take four 32-bit stores.
__device__ __forceinline__ void stmatrix_x4(void* row, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(shared_address(row)),
               "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

/// This lane's row address in a tile of layout Tile (sm80/swizzle.hpp) whose fragment has its
/// top-left corner at (row0, col0) of the tile as stored.
template <class Tile, class T>
__device__ __forceinline__ const T* lane_row(const T* tile, int row0, int col0, RowCol at) {
  return tile + Tile::offset(row0 + at.row, col0 + at.col);
}

// The loaders. Each comes in two forms: given this lane's row address (a kernel that keeps
// its lanes' offsets, sm80/swizzle.hpp's LaneOffsets or HoistedLaneOffsets), or given the
// tile and the fragment's corner (row0, col0), always the corner in the tile AS STORED.

/// A (16×16) from a tile stored [m][k]: rows m of Q (S = Q·Kᵀ), of dO (dP = dO·Vᵀ), of dS.
template <class T>
__device__ __forceinline__ void load_a(FragA& a, const T* lane_row) { ldmatrix_x4(a.r, lane_row); }
template <class Tile, class T>
__device__ __forceinline__ void load_a(FragA& a, const T* tile, int row0, int col0) {
  load_a(a, lane_row<Tile>(tile, row0, col0, ldmatrix_src_a(lane_id())));
}
/// A from a tile stored [k][m], transposed on the way: Pᵀ or dSᵀ from P or dS (backward).
template <class T>
__device__ __forceinline__ void load_a_trans(FragA& a, const T* lane_row) { ldmatrix_x4_trans(a.r, lane_row); }
template <class Tile, class T>
__device__ __forceinline__ void load_a_trans(FragA& a, const T* tile, int row0, int col0) {
  load_a_trans(a, lane_row<Tile>(tile, row0, col0, ldmatrix_src_a_trans(lane_id())));
}
/// B (16×8) = Kᵀ from K's rows, stored [n][k]: no transpose needed.
template <class Tile, class T>
__device__ __forceinline__ void load_b(FragB& b, const T* tile, int row0, int col0) {
  ldmatrix_x2(b.r, lane_row<Tile>(tile, row0, col0, ldmatrix_src_b(lane_id())));
}
/// Two B fragments (n 0-7 and n 8-15, i.e. 16 keys) from [n][k] in one instruction.
template <class T>
__device__ __forceinline__ void load_b_x4(FragB (&b)[2], const T* lane_row) {
  uint32_t r[4];
  ldmatrix_x4(r, lane_row);
  b[0] = {{r[0], r[1]}}, b[1] = {{r[2], r[3]}};
}
template <class Tile, class T>
__device__ __forceinline__ void load_b_x4(FragB (&b)[2], const T* tile, int row0, int col0) {
  load_b_x4(b, lane_row<Tile>(tile, row0, col0, ldmatrix_src_b_x4(lane_id())));
}
/// B (16×8) = V from V's rows, stored [k][n]: transposed on the way.
template <class Tile, class T>
__device__ __forceinline__ void load_b_trans(FragB& b, const T* tile, int row0, int col0) {
  ldmatrix_x2_trans(b.r, lane_row<Tile>(tile, row0, col0, ldmatrix_src_b_trans(lane_id())));
}
/// Two B fragments (n 0-7 and n 8-15: 16 columns of d) from [k][n] in one instruction.
template <class T>
__device__ __forceinline__ void load_b_trans_x4(FragB (&b)[2], const T* lane_row) {
  uint32_t r[4];
  ldmatrix_x4_trans(r, lane_row);
  b[0] = {{r[0], r[1]}}, b[1] = {{r[2], r[3]}};
}
template <class Tile, class T>
__device__ __forceinline__ void load_b_trans_x4(FragB (&b)[2], const T* tile, int row0, int col0) {
  load_b_trans_x4(b, lane_row<Tile>(tile, row0, col0, ldmatrix_src_b_trans_x4(lane_id())));
}

}  // namespace ft::tc
