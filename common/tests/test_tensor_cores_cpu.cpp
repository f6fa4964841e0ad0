// CPU tests of the tensor-core index math (common/sm80/fragment.hpp, common/sm80/swizzle.hpp):
// the mma.m16n8k16 and ldmatrix fragment layouts against the PTX ISA's own formulas and
// figures, the accumulator → A-operand identity that lets P feed P·V from registers, and
// the swizzle's bank-conflict claims, by enumeration.
//
// The PTX ISA is quoted from its sections (numbers as in PTX ISA 9.0):
//   9.7.14.5.8  "Matrix Fragments for mma.m16n8k16 with floating point type"
//   9.7.14.5.15 "Warp-level matrix load instruction: ldmatrix"
// Each ptx_* function below is a transcription of one formula there, written independently
// of the header so that the header can be wrong and the test can catch it.
#include <gtest/gtest.h>

#include <ostream>
#include <set>
#include <utility>
#include <vector>

#include "sm80/fragment.hpp"
#include "sm80/swizzle.hpp"

namespace ft::tc {
// How GoogleTest prints a position in failure messages (found by argument-dependent lookup).
std::ostream& operator<<(std::ostream& os, RowCol p) { return os << "(" << p.row << ", " << p.col << ")"; }
}  // namespace ft::tc

namespace {

using namespace ft::tc;

/// A position, written so that it can stand inside EXPECT_EQ( , ) (braces would split it).
constexpr RowCol rc(int row, int col) { return {row, col}; }

// ---- The PTX ISA's formulas ------------------------------------------------------------
// All of them start from   groupID = %laneid >> 2,   threadID_in_group = %laneid % 4.
int group_id(int lane) { return lane >> 2; }
int thread_in_group(int lane) { return lane % 4; }

// Multiplicand A, .f16/.bf16 (Figure "MMA .m16n8k16 fragment layout for matrix A"), a0..a7:
//   row = groupID       for ai where 0 <= i < 2 || 4 <= i < 6
//         groupID + 8   otherwise
//   col = (threadID_in_group * 2) + (i & 0x1)       for ai where i < 4
//         (threadID_in_group * 2) + (i & 0x1) + 8   for ai where i >= 4
RowCol ptx_a(int lane, int i) {
  const int row = (i < 2 || (i >= 4 && i < 6)) ? group_id(lane) : group_id(lane) + 8;
  const int col = thread_in_group(lane) * 2 + (i & 0x1) + (i < 4 ? 0 : 8);
  return {row, col};
}
// Multiplicand B, .f16/.bf16 (Figure "... for matrix B"), b0..b3, as (row k, col n):
//   row = (threadID_in_group * 2) + (i & 0x1)       for bi where i < 2
//         (threadID_in_group * 2) + (i & 0x1) + 8   for bi where i >= 2
//   col = groupID
RowCol ptx_b(int lane, int i) {
  return {thread_in_group(lane) * 2 + (i & 0x1) + (i < 2 ? 0 : 8), group_id(lane)};
}
// Accumulators C/D (Figure "... for accumulator matrix C/D"), c0..c3:
//   row = groupID for ci where i < 2,  groupID + 8 for ci where i >= 2
//   col = (threadID_in_group * 2) + (i & 0x1)
RowCol ptx_c(int lane, int i) {
  return {i < 2 ? group_id(lane) : group_id(lane) + 8, thread_in_group(lane) * 2 + (i & 0x1)};
}
// ldmatrix, one 8×8 matrix of 16-bit elements (Figure "ldmatrix fragment layout for one 8x8
// Matrix with 16-bit elements"): "a group of four threads loads an entire row": row r goes
// to lanes 4r..4r+3, two elements each, thread 0 receiving the first. So lane l receives
// row l/4, elements 2·(l%4) and 2·(l%4)+1. With .trans "the matrix is loaded in
// column-major format": lane l receives column l/4, rows 2·(l%4) and 2·(l%4)+1.
RowCol ptx_ldmatrix(int lane, int j, bool trans) {
  const RowCol m{lane / 4, 2 * (lane % 4) + j};
  return trans ? rc(m.col, m.row) : m;
}
// ldmatrix row addresses: "Addresses addr0–addr7 correspond to the rows of the first matrix,
// addresses addr8–addr15 correspond to the rows of the second matrix, and so on", handed in
// by threads 0–7, 8–15, 16–23, 24–31 (.x4; .x2 uses threads 0–15).

// ---- mma.m16n8k16 fragments ------------------------------------------------------------

TEST(MmaFragments, AMatchesPtxFormula) {
  for (int lane = 0; lane < kLanes; ++lane)
    for (int i = 0; i < 8; ++i) EXPECT_EQ(mma_a_coord(lane, i), ptx_a(lane, i)) << "lane " << lane << " a" << i;
}

TEST(MmaFragments, AMatchesPtxFigure) {
  // Read off the figure: lane 0 holds (0,0) (0,1) (8,0) (8,1) (0,8) (0,9) (8,8) (8,9);
  // lane 5 (groupID 1, threadID_in_group 1) (1,2) (1,3) (9,2) (9,3) (1,10) (1,11) (9,10) (9,11);
  // lane 31 (groupID 7, threadID_in_group 3) (7,6) (7,7) (15,6) (15,7) (7,14) (7,15) (15,14) (15,15).
  const std::vector<std::pair<int, std::vector<RowCol>>> table = {
      {0, {{0, 0}, {0, 1}, {8, 0}, {8, 1}, {0, 8}, {0, 9}, {8, 8}, {8, 9}}},
      {5, {{1, 2}, {1, 3}, {9, 2}, {9, 3}, {1, 10}, {1, 11}, {9, 10}, {9, 11}}},
      {31, {{7, 6}, {7, 7}, {15, 6}, {15, 7}, {7, 14}, {7, 15}, {15, 14}, {15, 15}}}};
  for (const auto& [lane, coords] : table)
    for (int i = 0; i < 8; ++i) EXPECT_EQ(mma_a_coord(lane, i), coords[i]) << "lane " << lane << " a" << i;
}

TEST(MmaFragments, BMatchesPtxFormulaAndFigure) {
  for (int lane = 0; lane < kLanes; ++lane)
    for (int i = 0; i < 4; ++i) EXPECT_EQ(mma_b_coord(lane, i), ptx_b(lane, i)) << "lane " << lane << " b" << i;
  // Figure, as (k, n): lane 0 holds (0,0) (1,0) (8,0) (9,0); lane 6 (groupID 1, threadID 2)
  // (4,1) (5,1) (12,1) (13,1); lane 31 (6,7) (7,7) (14,7) (15,7).
  EXPECT_EQ(mma_b_coord(0, 0), rc(0, 0));
  EXPECT_EQ(mma_b_coord(0, 1), rc(1, 0));
  EXPECT_EQ(mma_b_coord(0, 2), rc(8, 0));
  EXPECT_EQ(mma_b_coord(0, 3), rc(9, 0));
  EXPECT_EQ(mma_b_coord(6, 0), rc(4, 1));
  EXPECT_EQ(mma_b_coord(6, 3), rc(13, 1));
  EXPECT_EQ(mma_b_coord(31, 0), rc(6, 7));
  EXPECT_EQ(mma_b_coord(31, 3), rc(15, 7));
}

TEST(MmaFragments, CMatchesPtxFormulaAndFigure) {
  for (int lane = 0; lane < kLanes; ++lane)
    for (int i = 0; i < 4; ++i) EXPECT_EQ(mma_c_coord(lane, i), ptx_c(lane, i)) << "lane " << lane << " c" << i;
  // Figure: lane 0 holds (0,0) (0,1) (8,0) (8,1); lane 9 (groupID 2, threadID 1) (2,2) (2,3)
  // (10,2) (10,3); lane 31 (7,6) (7,7) (15,6) (15,7).
  EXPECT_EQ(mma_c_coord(0, 2), rc(8, 0));
  EXPECT_EQ(mma_c_coord(9, 0), rc(2, 2));
  EXPECT_EQ(mma_c_coord(9, 3), rc(10, 3));
  EXPECT_EQ(mma_c_coord(31, 1), rc(7, 7));
  EXPECT_EQ(mma_c_coord(31, 2), rc(15, 6));
}

// Every element of A (16×16), B (16×8) and C (16×8) is held by exactly one (lane, index).
template <class Coord>
void expect_covers_once(Coord coord, int per_lane, int rows, int cols) {
  std::vector<int> hits(rows * cols, 0);
  for (int lane = 0; lane < kLanes; ++lane)
    for (int i = 0; i < per_lane; ++i) {
      const RowCol p = coord(lane, i);
      ASSERT_TRUE(p.row >= 0 && p.row < rows && p.col >= 0 && p.col < cols) << p;
      ++hits[p.row * cols + p.col];
    }
  for (int h : hits) EXPECT_EQ(h, 1);
}

TEST(MmaFragments, EachElementHeldOnce) {
  expect_covers_once(mma_a_coord, 8, kMmaM, kMmaK);
  expect_covers_once(mma_b_coord, 4, kMmaK, kMmaN);
  expect_covers_once(mma_c_coord, 4, kMmaM, kMmaN);
}

TEST(MmaFragments, RegisterHoldsNeighbouringColumnsLowFirst) {
  // Element 2r is the low half of register r and 2r+1 the high half: same row, next column
  // of A and C; next k (row) of B. pack2(lo, hi) and ldmatrix's element order rely on it.
  for (int lane = 0; lane < kLanes; ++lane) {
    for (int r = 0; r < 4; ++r)
      EXPECT_EQ(mma_a_coord(lane, 2 * r + 1), mma_a_coord(lane, 2 * r) + rc(0, 1));
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(mma_b_coord(lane, 2 * r + 1), mma_b_coord(lane, 2 * r) + rc(1, 0));
      EXPECT_EQ(mma_c_coord(lane, 2 * r + 1), mma_c_coord(lane, 2 * r) + rc(0, 1));
    }
  }
}

// ---- P from the accumulators of S = Q·Kᵀ to the A operand of P·V -----------------------

TEST(AccumulatorToA, SameElementInSameLane) {
  // a_i of lane l is element a_from_c(i) of accumulator tile 0 (keys 0-7) or 1 (keys 8-15),
  // and that element sits at the same (row, key) in S: tile t's column c is key 8t + c.
  for (int lane = 0; lane < kLanes; ++lane)
    for (int i = 0; i < 8; ++i) {
      const CSource s = a_from_c(i);
      ASSERT_TRUE(s.tile == 0 || s.tile == 1);
      ASSERT_TRUE(s.index >= 0 && s.index < 4);
      EXPECT_EQ(ptx_c(lane, s.index) + rc(0, kMmaN * s.tile), ptx_a(lane, i)) << "lane " << lane << " a" << i;
    }
}

TEST(AccumulatorToA, LaneHoldsTheSameSetOfPositions) {
  // Set equality, lane by lane: what lane l holds of the two S tiles is exactly what it must
  // hold of P's A fragment, so no element ever has to move between lanes.
  for (int lane = 0; lane < kLanes; ++lane) {
    std::set<std::pair<int, int>> from_c, as_a;
    for (int t = 0; t < 2; ++t)
      for (int i = 0; i < 4; ++i) from_c.insert({ptx_c(lane, i).row, ptx_c(lane, i).col + kMmaN * t});
    for (int i = 0; i < 8; ++i) as_a.insert({ptx_a(lane, i).row, ptx_a(lane, i).col});
    EXPECT_EQ(from_c, as_a) << "lane " << lane;
  }
}

TEST(AccumulatorToA, RegisterPairsComeFromOneTile) {
  // pack2 packs a_{2r} and a_{2r+1} into register r: both must come from the same tile, as
  // consecutive elements c_j, c_{j+1} (what a_from_accumulators assumes).
  for (int r = 0; r < 4; ++r) {
    const CSource lo = a_from_c(2 * r), hi = a_from_c(2 * r + 1);
    EXPECT_EQ(lo.tile, hi.tile);
    EXPECT_EQ(hi.index, lo.index + 1);
    EXPECT_EQ(lo.index % 2, 0);
  }
}

// ---- ldmatrix --------------------------------------------------------------------------

TEST(Ldmatrix, ReceivedMatchesPtxFigure) {
  for (int lane = 0; lane < kLanes; ++lane)
    for (int j = 0; j < 2; ++j)
      for (bool trans : {false, true})
        EXPECT_EQ(ldmatrix_received(lane, j, trans), ptx_ldmatrix(lane, j, trans)) << lane;
  // Figure: lane 0 gets row 0 elements 0,1; lane 1 row 0 elements 2,3; lane 4 row 1
  // elements 0,1; lane 31 row 7 elements 6,7. With .trans lane 1 gets column 0, rows 2,3.
  EXPECT_EQ(ldmatrix_received(1, 0, false), rc(0, 2));
  EXPECT_EQ(ldmatrix_received(4, 1, false), rc(1, 1));
  EXPECT_EQ(ldmatrix_received(31, 1, false), rc(7, 7));
  EXPECT_EQ(ldmatrix_received(1, 1, true), rc(3, 0));
  EXPECT_EQ(ldmatrix_received(31, 0, true), rc(6, 7));
}

TEST(Ldmatrix, EightLanesPerMatrix) {
  // Threads 0–7: addr0–addr7 (matrix 0), 8–15: matrix 1, 16–23: matrix 2, 24–31: matrix 3.
  for (int lane = 0; lane < kLanes; ++lane) {
    EXPECT_EQ(ldmatrix_matrix(lane), lane / 8);
    EXPECT_EQ(ldmatrix_row(lane), lane % 8);
  }
}

// One ldmatrix, simulated from the PTX text alone: lane L hands in the stored (row, col) where
// its row starts, src(L); the row of matrix q numbered r is the one lane 8q + r handed in.
// Returns the stored (row, col) of element j of the register q that `lane` receives.
template <class Src>
RowCol simulate_ldmatrix(Src src, int lane, int q, int j, bool trans) {
  const RowCol in_matrix = ptx_ldmatrix(lane, j, trans);  // (row, col) inside matrix q
  const RowCol row_start = src(8 * q + in_matrix.row);
  return row_start + rc(0, in_matrix.col);
}

// Each loader's registers, as ldmatrix fills them, must be exactly the fragment mma.sync
// expects (the PTX formulas), mapped to the tile as stored: A [m][k]; Aᵀ [k][m]; B = Kᵀ
// with K stored [n][k]; B = V stored [k][n]. The x4 forms of B give two n8 tiles.
TEST(Ldmatrix, LoadersProduceMmaFragments) {
  for (int lane = 0; lane < kLanes; ++lane)
    for (int j = 0; j < 2; ++j) {
      for (int q = 0; q < 4; ++q) {
        EXPECT_EQ(simulate_ldmatrix(ldmatrix_src_a, lane, q, j, false), ptx_a(lane, 2 * q + j))
            << "A lane " << lane << " reg " << q;
        EXPECT_EQ(simulate_ldmatrix(ldmatrix_src_a_trans, lane, q, j, true),
                  transposed(ptx_a(lane, 2 * q + j)))
            << "A from [k][m], lane " << lane << " reg " << q;
        const int tile = q / 2, reg = q % 2;
        EXPECT_EQ(simulate_ldmatrix(ldmatrix_src_b_x4, lane, q, j, false),
                  transposed(ptx_b(lane, 2 * reg + j)) + rc(kMmaN * tile, 0))
            << "B pair from [n][k], lane " << lane << " matrix " << q;
        EXPECT_EQ(simulate_ldmatrix(ldmatrix_src_b_trans_x4, lane, q, j, true),
                  ptx_b(lane, 2 * reg + j) + rc(0, kMmaN * tile))
            << "B pair from [k][n], lane " << lane << " matrix " << q;
      }
      for (int q = 0; q < 2; ++q) {
        EXPECT_EQ(simulate_ldmatrix(ldmatrix_src_b, lane, q, j, false), transposed(ptx_b(lane, 2 * q + j)))
            << "B from [n][k], lane " << lane << " reg " << q;
        EXPECT_EQ(simulate_ldmatrix(ldmatrix_src_b_trans, lane, q, j, true), ptx_b(lane, 2 * q + j))
            << "B from [k][n], lane " << lane << " reg " << q;
      }
    }
}

TEST(Ldmatrix, EveryLaneHandsInAnAlignedRowInsideTheFragment) {
  // .x2 reads addresses from lanes 0-15 only, but lanes 16-31 still hand in rows of the
  // fragment (the PTX ISA asks for that on sm_75 and below). Each row start is a whole chunk
  // (8 elements, 16 bytes: ldmatrix's alignment) inside the 16×16 stored fragment.
  for (auto src : {ldmatrix_src_a, ldmatrix_src_a_trans, ldmatrix_src_b, ldmatrix_src_b_x4,
                   ldmatrix_src_b_trans, ldmatrix_src_b_trans_x4})
    for (int lane = 0; lane < kLanes; ++lane) {
      const RowCol p = src(lane);
      EXPECT_TRUE(p.row >= 0 && p.row < 16 && p.col >= 0 && p.col + kChunkElems <= 16) << p;
      EXPECT_EQ(p.col % kChunkElems, 0) << p;
    }
}

// ---- Swizzle and bank conflicts --------------------------------------------------------

TEST(BankConflicts, CountingModel) {
  const int same_word[4] = {64, 64, 64, 64};  // one word, asked for 4 times: a broadcast
  EXPECT_EQ(bank_conflict_ways(same_word, 4, 4), 1);
  static constexpr int one_period[8] = {0, 16, 32, 48, 64, 80, 96, 112};  // 8 chunks = all 32 banks
  EXPECT_EQ(bank_conflict_ways(one_period, 8, 16), 1);
  const int two_periods[2] = {0, 128};  // same bank, different words
  EXPECT_EQ(bank_conflict_ways(two_periods, 2, 4), 2);
  const int column[8] = {0, 128, 256, 384, 512, 640, 768, 896};  // 8 rows of a plain tile
  EXPECT_EQ(bank_conflict_ways(column, 8, 16), 8);
  static_assert(bank_conflict_ways(one_period, 8, 16) == 1, "usable at compile time too");
}

template <int COLS>
void expect_swizzle_bijective_per_row() {
  using Tile = SwizzledTile<COLS>;
  for (int row = 0; row < 64; ++row) {
    std::vector<int> hits(COLS, 0);
    for (int col = 0; col < COLS; ++col) {
      const int in_row = Tile::offset(row, col) - row * COLS;
      ASSERT_TRUE(in_row >= 0 && in_row < COLS) << "row " << row << " col " << col;
      ++hits[in_row];
      // A chunk stays whole and in order, and inside its own 128-byte slab.
      EXPECT_EQ(in_row % kChunkElems, col % kChunkElems);
      EXPECT_EQ(in_row / (kBankRowBytes / kElemBytes), col / (kBankRowBytes / kElemBytes));
    }
    for (int h : hits) EXPECT_EQ(h, 1) << "row " << row;
  }
}

TEST(Swizzle, BijectionWithinEachRow) {
  expect_swizzle_bijective_per_row<64>();
  expect_swizzle_bijective_per_row<128>();
  // The picture in swizzle.hpp: row 1 stores logical chunks 0 1 2 3 as 1 0 3 2, row 7 as 7 6 5 4.
  EXPECT_EQ(swizzle_chunk(1, 0), 1);
  EXPECT_EQ(swizzle_chunk(1, 3), 2);
  EXPECT_EQ(swizzle_chunk(7, 0), 7);
  EXPECT_EQ(swizzle_chunk(7, 3), 4);
  EXPECT_EQ(swizzle_chunk(9, 0), 1) << "the pattern repeats every 8 rows";
  EXPECT_EQ(swizzle_chunk(3, 12), 15) << "chunks 8-15 of a 128-element row stay in 8-15";
}

// The worst bank-conflict degree of any ldmatrix phase (8 lanes, one matrix) of loader
// `src`, over every fragment corner in a 64-row tile of layout Tile.
template <class Tile, class Src>
int worst_ldmatrix_ways(Src src, int matrices) {
  int worst = 0;
  for (int row0 = 0; row0 + 16 <= 64; row0 += kBlock)
    for (int col0 = 0; col0 + 16 <= Tile::kCols; col0 += kBlock)
      for (int q = 0; q < matrices; ++q) {
        int bytes[kBlock];
        for (int r = 0; r < kBlock; ++r) {
          const RowCol p = src(kBlock * q + r);
          bytes[r] = Tile::offset(row0 + p.row, col0 + p.col) * kElemBytes;
        }
        const int ways = bank_conflict_ways(bytes, kBlock, kChunkBytes);
        worst = ways > worst ? ways : worst;
      }
  return worst;
}

// Q and K tiles are read with ldmatrix_src_a / _b / _b_x4 (A and B from [rows][d]), V with
// the .trans loaders, P or dS (backward) with ldmatrix_src_a_trans.
template <class Tile>
std::vector<int> ways_of_every_loader() {
  return {worst_ldmatrix_ways<Tile>(ldmatrix_src_a, 4),       worst_ldmatrix_ways<Tile>(ldmatrix_src_a_trans, 4),
          worst_ldmatrix_ways<Tile>(ldmatrix_src_b, 2),       worst_ldmatrix_ways<Tile>(ldmatrix_src_b_x4, 4),
          worst_ldmatrix_ways<Tile>(ldmatrix_src_b_trans, 2), worst_ldmatrix_ways<Tile>(ldmatrix_src_b_trans_x4, 4)};
}

TEST(Swizzle, LdmatrixConflictFree) {
  const std::vector<int> none(6, 1);
  EXPECT_EQ(ways_of_every_loader<SwizzledTile<64>>(), none);
  EXPECT_EQ(ways_of_every_loader<SwizzledTile<128>>(), none);
}

TEST(Swizzle, PaddedRowsConflictFreeToo) {
  const std::vector<int> none(6, 1);
  EXPECT_EQ(ways_of_every_loader<PaddedTile<64>>(), none);
  EXPECT_EQ(ways_of_every_loader<PaddedTile<128>>(), none);
  EXPECT_EQ(tile_bytes<PaddedTile<64>>(64), 64 * 144) << "the price: 16 bytes per row";
  EXPECT_EQ(tile_bytes<SwizzledTile<64>>(64), 64 * 128);
}

TEST(Swizzle, PlainRowsConflictEightWays) {
  // Without swizzle or padding, 8 rows of 128 or 256 bytes start in the same bank group:
  // this is what the two tests above cure (and proves those tests can fail).
  const std::vector<int> eight(6, 8);
  EXPECT_EQ(ways_of_every_loader<PlainTile<64>>(), eight);
  EXPECT_EQ(ways_of_every_loader<PlainTile<128>>(), eight);
}

template <class Tile>
int worst_row_write_ways() {
  // copy_tile_async: 8 consecutive lanes write 8 consecutive logical chunks of one row.
  int worst = 0;
  for (int row = 0; row < 64; ++row)
    for (int chunk0 = 0; chunk0 < Tile::kCols / kChunkElems; chunk0 += kBlock) {
      int bytes[kBlock];
      for (int c = 0; c < kBlock; ++c) bytes[c] = Tile::offset(row, (chunk0 + c) * kChunkElems) * kElemBytes;
      const int ways = bank_conflict_ways(bytes, kBlock, kChunkBytes);
      worst = ways > worst ? ways : worst;
    }
  return worst;
}

TEST(Swizzle, TileCopyWritesConflictFree) {
  EXPECT_EQ(worst_row_write_ways<SwizzledTile<64>>(), 1);
  EXPECT_EQ(worst_row_write_ways<SwizzledTile<128>>(), 1);
  EXPECT_EQ(worst_row_write_ways<PaddedTile<64>>(), 1);
}

// tc::TileCopy moves a thread's chunk `it` to its first chunk's place plus it·R rows, and
// tc::HoistedLaneOffsets adds dr rows the same way: right for a swizzled tile exactly when
// the step is a whole number of swizzle periods (8 rows), always for padded and plain rows.
template <class Tile>
bool rows_step_by_a_constant(int rows_step) {
  for (int row = 0; row < 64; ++row)
    for (int col = 0; col < Tile::kCols; col += kChunkElems)
      if (Tile::offset(row + rows_step, col) != Tile::offset(row, col) + rows_step * Tile::kRowStride)
        return false;
  return true;
}

TEST(Swizzle, WholePeriodsOfRowsStepByAConstant) {
  for (int step : {8, 16, 32}) {
    EXPECT_TRUE(rows_step_by_a_constant<SwizzledTile<64>>(step)) << step;
    EXPECT_TRUE(rows_step_by_a_constant<SwizzledTile<128>>(step)) << step;
  }
  EXPECT_FALSE(rows_step_by_a_constant<SwizzledTile<64>>(4));  // half a period: chunks move
  EXPECT_TRUE(rows_step_by_a_constant<PaddedTile<64>>(4));
}

// HoistedLaneOffsets against Tile::offset over every lane place and fragment place that
// meets hoistable(): the algebra of swizzle.hpp, for any corner a multiple of 8 rows and a
// power-of-two span of columns.
TEST(Swizzle, HoistedLaneOffsetsWhereHoistable) {
  using Tile = SwizzledTile<128>;
  int checked = 0;
  for (RowCol corner : {RowCol{0, 0}, RowCol{32, 64}, RowCol{96, 32}})
    for (int r = 0; r < 16; ++r)
      for (int c = 0; c < 16; c += kChunkElems / 4)  // lane places, including inside a chunk
        for (int dr = 0; dr < 32; dr += 8)
          for (int dc = 0; corner.col + c + dc < Tile::kCols; dc += kChunkElems)
            if (HoistedLaneOffsets<Tile>::hoistable(corner, {r, c}, dr, dc)) {
              ++checked;
              ASSERT_EQ(HoistedLaneOffsets<Tile>(corner, {r, c})(dr, dc),
                        Tile::offset(corner.row + r + dr, corner.col + c + dc))
                  << corner.row << "," << corner.col << " lane " << r << "," << c << " dr " << dr << " dc " << dc;
            }
  EXPECT_GT(checked, 1000);
}

}  // namespace
