/// @file fragment.hpp
/// @brief Who holds what in a tensor-core product: the register fragments of
/// `mma.sync.aligned.m16n8k16` (bf16/fp16 in, float32 accumulators) and of `ldmatrix`, as
/// plain index math that the CPU tests check against the PTX ISA's tables.
///
/// One idea carries all of it. Each fragment is cut into 8×8 blocks, and inside every block
/// the 32 lanes of a warp hold their elements the same way: lane l holds row l/4 and two
/// neighbouring columns, 2·(l%4) and 2·(l%4)+1, in one 32-bit register (the first of the
/// two in the low 16 bits). One 8×8 block, each cell one register of two elements:
///
///              cols 0,1  cols 2,3  cols 4,5  cols 6,7
///     row 0:     T0        T1        T2        T3
///     row 1:     T4        T5        T6        T7
///      ...
///     row 7:     T28       T29       T30       T31
///
/// A fragment is a few such blocks; which register holds which block is all that changes:
///
///     A: 16×16 (rows m, cols k)     B: 16×8 (rows k, cols n)      C, D: 16×8 float
///          k 0-7    k 8-15                 n 0-7                         n 0-7
///        +--------+--------+             +--------+                    +--------+
///  m 0-7 | a0,a1  | a4,a5  |       k 0-7 | b0,b1  |              m 0-7 | c0,c1  |
///  m 8-15| a2,a3  | a6,a7  |       k 8-15| b2,b3  |              m 8-15| c2,c3  |
///        +--------+--------+             +--------+                    +--------+
///     4 registers: a0a1 a2a3 a4a5 a6a7   2 registers, each block      4 floats, no packing
///                                        TRANSPOSED: lane l holds
///                                        column n = l/4, rows k = 2·(l%4), +1
///
/// B is the odd one: its blocks are the picture above transposed. Read as Bᵀ (8×16, rows n,
/// cols k) it is laid out like A, which is why B = Kᵀ loads straight from K's rows.
/// Sources: PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type" (figures
/// for A, B and C/D with .f16/.bf16) and "Warp-level matrix load instruction: ldmatrix".
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FT_TC_HD __host__ __device__
#else
#define FT_TC_HD
#endif

namespace ft::tc {

constexpr int kLanes = 32;         ///< lanes of a warp; mma.sync and ldmatrix need all of them
constexpr int kBlock = 8;          ///< side of the 8×8 blocks every fragment is made of
constexpr int kPair = 2;           ///< 16-bit elements in one 32-bit register
constexpr int kLanesPerRow = kBlock / kPair;  ///< 4 lanes × 2 elements cover a block's row
constexpr int kMmaM = 16, kMmaN = 8, kMmaK = 16;  ///< the shape m16n8k16
constexpr int kMBlocks = kMmaM / kBlock;  ///< 2: blocks down A and C (rows 0-7, rows 8-15)
/// Registers per lane: 256 elements of A / 32 lanes / 2 per register, 128 of B likewise,
/// 128 floats of C / 32 lanes.
constexpr int kARegs = 4, kBRegs = 2, kCElems = 4;

/// The registers of one lane. A and B registers hold two bf16 or fp16 values each.
struct FragA { uint32_t r[kARegs]; };  ///< 16×16 multiplicand A: a0..a7
struct FragB { uint32_t r[kBRegs]; };  ///< 16×8 multiplicand B: b0..b3
struct FragC { float c[kCElems]; };    ///< 16×8 float accumulator C (and result D): c0..c3

/// A position in a matrix or tile: row, column (in elements).
struct RowCol {
  int row, col;
  FT_TC_HD constexpr RowCol operator+(RowCol o) const { return {row + o.row, col + o.col}; }
  FT_TC_HD constexpr bool operator==(RowCol o) const { return row == o.row && col == o.col; }
};
FT_TC_HD constexpr RowCol transposed(RowCol p) { return {p.col, p.row}; }

/// The PTX ISA's "groupID": the row of a block this lane holds (lanes 4g..4g+3 share it).
FT_TC_HD constexpr int lane_group(int lane) { return lane / kLanesPerRow; }
/// The PTX ISA's "threadID_in_group": which pair of columns of that row.
FT_TC_HD constexpr int lane_in_group(int lane) { return lane % kLanesPerRow; }

/// Element j (0: low half, 1: high half) of a lane's register inside an 8×8 block.
FT_TC_HD constexpr RowCol pair_in_block(int lane, int j) {
  return {lane_group(lane), kPair * lane_in_group(lane) + j};
}

// ---- mma.m16n8k16: which block each register covers, and so where element i sits ------

/// Top-left corner of the block that A's register `reg` (0..3) covers: down, then across.
FT_TC_HD constexpr RowCol a_block(int reg) {
  return {kBlock * (reg % kMBlocks), kBlock * (reg / kMBlocks)};
}
/// ... of B's register `reg` (0..1), as (k, n): the first 8 k, then the next 8.
FT_TC_HD constexpr RowCol b_block(int reg) { return {kBlock * reg, 0}; }
/// ... of C's elements c0,c1 (half 0) and c2,c3 (half 1): rows 0-7, then rows 8-15.
FT_TC_HD constexpr RowCol c_block(int half) { return {kBlock * half, 0}; }

/// (m, k) of element a_i (i = 0..7; register i/2) that `lane` holds.
FT_TC_HD constexpr RowCol mma_a_coord(int lane, int i) {
  return a_block(i / kPair) + pair_in_block(lane, i % kPair);
}
/// (k, n) of element b_i (i = 0..3; register i/2): the block picture transposed.
FT_TC_HD constexpr RowCol mma_b_coord(int lane, int i) {
  return b_block(i / kPair) + transposed(pair_in_block(lane, i % kPair));
}
/// (m, n) of accumulator element c_i (i = 0..3).
FT_TC_HD constexpr RowCol mma_c_coord(int lane, int i) {
  return c_block(i / kPair) + pair_in_block(lane, i % kPair);
}

// ---- P = softmax(S) goes from accumulator to A operand without moving ------------------
// S = Q·Kᵀ over 16 keys is two accumulator tiles side by side (keys 0-7, keys 8-15). Its
// blocks, read left to right and top to bottom, are A's blocks in A's register order:
//
//          keys 0-7      keys 8-15                     k 0-7    k 8-15
//        +-----------+-----------+                  +--------+--------+
//  m 0-7 | S[0].c0,c1| S[1].c0,c1|   is, lane for   | a0,a1  | a4,a5  |
//  m 8-15| S[0].c2,c3| S[1].c2,c3|   lane, exactly  | a2,a3  | a6,a7  |
//        +-----------+-----------+                  +--------+--------+
//
// so every lane already holds the P elements its A fragment of P·V needs: a_i = S[i/4].c_{i%4}.
// Only the conversion float → bf16/fp16 (sm80/pack.cuh) happens, in registers.

/// Which accumulator tile (0: keys 0-7, 1: keys 8-15) and element hold A's element a_i.
struct CSource { int tile, index; };
FT_TC_HD constexpr CSource a_from_c(int i) { return {i / kCElems, i % kCElems}; }

// ---- ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared.b16 --------------------------
// Loads 1, 2 or 4 8×8 matrices of 16-bit elements from shared memory, one per register.
// Each lane hands in the address of ONE row (16 bytes): lanes 0-7 the rows 0-7 of matrix 0,
// lanes 8-15 those of matrix 1, 16-23 matrix 2, 24-31 matrix 3 (.x2 reads lanes 0-15 only,
// .x1 lanes 0-7). Rows may lie anywhere; each must be 16-byte aligned. Then every lane
// receives, in register q, its pair of matrix q in the block picture above; with .trans,
// the pair of the transposed matrix (column l/4, rows 2·(l%4) and +1 of the matrix as stored).

/// Which matrix this lane's address is a row of, and which row.
FT_TC_HD constexpr int ldmatrix_matrix(int lane) { return lane / kBlock; }
FT_TC_HD constexpr int ldmatrix_row(int lane) { return lane % kBlock; }
/// (row, col) within the stored 8×8 matrix of element j of the register `lane` receives.
FT_TC_HD constexpr RowCol ldmatrix_received(int lane, int j, bool trans) {
  return trans ? transposed(pair_in_block(lane, j)) : pair_in_block(lane, j);
}

// Where each lane points ldmatrix: the start of its row, as (row, col) in the stored tile,
// relative to the fragment's corner there. Matrix q is chosen to be register q of the
// fragment, so the registers come out in the order mma.sync wants them.

/// A (16×16) from a tile stored [m][k] (Q, dO): .x4, matrix q = A's block a_block(q).
FT_TC_HD constexpr RowCol ldmatrix_src_a(int lane) {
  return a_block(ldmatrix_matrix(lane)) + RowCol{ldmatrix_row(lane), 0};
}
/// A from a tile stored [k][m] (A = Pᵀ or dSᵀ, stored as P, dS): .x4.trans.
FT_TC_HD constexpr RowCol ldmatrix_src_a_trans(int lane) {
  return transposed(a_block(ldmatrix_matrix(lane))) + RowCol{ldmatrix_row(lane), 0};
}
/// B (16×8) from a tile stored [n][k] (B = Kᵀ with K stored by rows): .x2, no .trans,
/// since Bᵀ's blocks are laid out like A's. Lanes 16-31 repeat lanes 0-15's addresses.
FT_TC_HD constexpr RowCol ldmatrix_src_b(int lane) {
  return transposed(b_block(ldmatrix_matrix(lane) % kBRegs)) + RowCol{ldmatrix_row(lane), 0};
}
/// Two B fragments side by side (n 0-7, n 8-15) from [n][k]: .x4, matrices 0,1 the first.
FT_TC_HD constexpr RowCol ldmatrix_src_b_x4(int lane) {
  const int tile = ldmatrix_matrix(lane) / kBRegs, reg = ldmatrix_matrix(lane) % kBRegs;
  return transposed(b_block(reg)) + RowCol{kMmaN * tile + ldmatrix_row(lane), 0};
}
/// B from a tile stored [k][n] (V stored by rows: B = V): .x2.trans. Lanes 16-31 as above.
FT_TC_HD constexpr RowCol ldmatrix_src_b_trans(int lane) {
  return b_block(ldmatrix_matrix(lane) % kBRegs) + RowCol{ldmatrix_row(lane), 0};
}
/// Two B fragments side by side (n 0-7, n 8-15) from [k][n]: .x4.trans.
FT_TC_HD constexpr RowCol ldmatrix_src_b_trans_x4(int lane) {
  const int tile = ldmatrix_matrix(lane) / kBRegs, reg = ldmatrix_matrix(lane) % kBRegs;
  return b_block(reg) + RowCol{ldmatrix_row(lane), kMmaN * tile};
}

}  // namespace ft::tc
