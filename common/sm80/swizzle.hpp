/// @file swizzle.hpp
/// @brief Where element (row, col) of a shared-memory tile of 16-bit elements is stored, in
/// three layouts (plain, padded, swizzled), and the bank-conflict count that tells them apart.
///
/// Shared memory is 32 banks of 4 bytes: byte address a is in bank (a / 4) % 32, so every
/// 128 bytes the bank numbers start again. ldmatrix reads a matrix as 8 rows of 16 bytes,
/// one row address per lane, all 8 in one pass when they fall in 8 different 16-byte
/// "bank groups" (a / 16) % 8. A tile row of 64 bf16 is exactly 128 bytes, of 128 bf16 256
/// bytes, so with rows stored back to back (plain) the 8 rows of a matrix — same column,
/// consecutive rows — all start in the same bank group: an 8-way conflict, 8 passes.
///
/// Two cures. Padded: 16 more bytes per row; row r then starts r bank groups further on.
/// Swizzled: keep the rows dense, but store the 16-byte chunk c of row r at chunk
/// c XOR (r % 8). Eight consecutive rows send the same logical chunk to 8 different places:
///
///     logical chunk:   0 1 2 3 4 5 6 7           (row of 64 elements = 8 chunks)
///     row 0 stores it: 0 1 2 3 4 5 6 7
///     row 1          : 1 0 3 2 5 4 7 6
///     row 2          : 2 3 0 1 6 7 4 5
///     row 3          : 3 2 1 0 7 6 5 4           column "logical chunk 0" reads
///      ...                                       physical chunks 0,1,2,...,7: all
///     row 7          : 7 6 5 4 3 2 1 0           8 bank groups, no conflict
///
/// XOR with a number below 8 only changes the low three bits of the chunk index, so a chunk
/// stays inside its own 128 bytes of the row (a bijection of each row onto itself), and the
/// 8 elements of a chunk stay together and in order: a 16-byte copy and an ldmatrix row
/// still see 16 contiguous bytes. (CuTe writes this as Swizzle<3,3,3> over each 64-element,
/// 128-byte slab of a row: element-index bits 6-8, the row mod 8, XORed into bits 3-5.)
#pragma once

#include "sm80/fragment.hpp"  // FT_TC_HD

namespace ft::tc {

constexpr int kElemBytes = 2;        ///< bf16 and fp16: 16-bit elements
constexpr int kChunkBytes = 16;      ///< one ldmatrix row, one cp.async: 16 bytes
constexpr int kChunkElems = kChunkBytes / kElemBytes;  ///< 8 elements per chunk
constexpr int kBanks = 32;           ///< shared-memory banks
constexpr int kBankBytes = 4;        ///< bytes per bank per pass
constexpr int kBankRowBytes = kBanks * kBankBytes;  ///< 128: the bank pattern's period
constexpr int kBankGroups = kBankRowBytes / kChunkBytes;  ///< 8 chunk positions per period
/// Rows after which the swizzle repeats: one per bank group, so 8 consecutive rows differ.
constexpr int kSwizzleRows = kBankGroups;

/// The swizzle: where logical 16-byte chunk `chunk` of row `row` is stored in that row.
FT_TC_HD constexpr int swizzle_chunk(int row, int chunk) { return chunk ^ (row % kSwizzleRows); }

/// Rows of COLS elements stored back to back: the layout with the 8-way conflicts.
template <int COLS>
struct PlainTile {
  static constexpr int kCols = COLS;
  static constexpr int kRowStride = COLS;  ///< elements from one row's start to the next
  FT_TC_HD static constexpr int offset(int row, int col) { return row * kRowStride + col; }
};

/// Rows padded by one chunk (16 bytes): row r starts r bank groups further than plain.
template <int COLS>
struct PaddedTile {
  static constexpr int kCols = COLS;
  static constexpr int kRowStride = COLS + kChunkElems;
  FT_TC_HD static constexpr int offset(int row, int col) { return row * kRowStride + col; }
};

/// Dense rows, chunks swizzled. COLS a multiple of 64 (128 bytes), so that every chunk
/// index c XOR (r % 8) exists in the row: 64 (8 chunks) and 128 (16 chunks) for d = 64, 128.
template <int COLS>
struct SwizzledTile {
  static_assert(COLS * kElemBytes % kBankRowBytes == 0, "rows of whole 128-byte periods");
  static constexpr int kCols = COLS;
  static constexpr int kRowStride = COLS;
  FT_TC_HD static constexpr int offset(int row, int col) {
    return row * kRowStride + swizzle_chunk(row, col / kChunkElems) * kChunkElems + col % kChunkElems;
  }
};

/// Bytes of shared memory a tile of `rows` rows takes in layout Tile.
template <class Tile>
FT_TC_HD constexpr int tile_bytes(int rows) { return rows * Tile::kRowStride * kElemBytes; }

// ---- One lane's offsets in a warp's tile -----------------------------------------------
// A warp tile is read (ldmatrix) and written (accumulator pairs) as fragments at fixed
// places (dr, dc) from the warp's corner: compile-time constants of the unrolled loops. A
// lane's own element of each is Tile::offset(corner + lane + (dr, dc)), where corner is
// known only at run time (it depends on the warp) and lane is its place in a fragment
// (ldmatrix_src_*, mma_c_coord). The two types below give the same numbers; they differ in
// what each use costs once compiled.

/// Recomputes Tile::offset at every use: a row, a division, a modulo and an XOR per load,
/// about five integer instructions, since the corner is not a constant.
template <class Tile>
struct LaneOffsets {
  RowCol at;  ///< corner + lane
  FT_TC_HD constexpr LaneOffsets(RowCol corner, RowCol lane) : at(corner + lane) {}
  FT_TC_HD constexpr int operator()(int dr, int dc) const { return Tile::offset(at.row + dr, at.col + dc); }
};

/// The same offsets in a SwizzledTile with the lane's part of the swizzle computed once.
/// With r = corner.row + lane.row and c = corner.col + lane.col,
///     offset(r + dr, c + dc) = (r + dr)·COLS + (((c + dc)/8) XOR ((r + dr) % 8))·8 + c % 8.
/// When dr % 8 == 0 the row's XOR term (r + dr) % 8 is r % 8; when dc % 8 == 0 and dc/8 has
/// no bit in common with c/8 (the warp's corner and the fragments' places are powers of two
/// apart), (c + dc)/8 = c/8 XOR dc/8. So
///     offset = [r·COLS + c % 8] + dr·COLS + ([c/8 XOR r % 8] XOR dc/8)·8,
/// the brackets computed once (two registers), the rest one XOR with a constant and an
/// immediate offset in the instruction. hoistable() states the condition; the CPU tests
/// check it, and the equality, for every load of the kernels that use this.
template <class Tile>
struct HoistedLaneOffsets {
  static_assert(Tile::kRowStride == Tile::kCols && Tile::offset(1, 0) == Tile::kCols + kChunkElems,
                "a swizzled tile (SwizzledTile): dense rows, chunk c of row 1 stored at c XOR 1");
  int row;    ///< r·COLS + c % 8
  int chunk;  ///< where logical chunk c/8 of row r is stored: c/8 XOR (r % 8)
  FT_TC_HD constexpr HoistedLaneOffsets(RowCol corner, RowCol lane)
      : row((corner.row + lane.row) * Tile::kRowStride + (corner.col + lane.col) % kChunkElems),
        chunk(swizzle_chunk(corner.row + lane.row, (corner.col + lane.col) / kChunkElems)) {}
  FT_TC_HD constexpr int operator()(int dr, int dc) const {
    return row + dr * Tile::kRowStride + (chunk ^ (dc / kChunkElems)) * kChunkElems;
  }
  /// Whether operator()(dr, dc) equals Tile::offset for this corner and lane.
  FT_TC_HD static constexpr bool hoistable(RowCol corner, RowCol lane, int dr, int dc) {
    const int c = corner.col + lane.col;
    return dr % kSwizzleRows == 0 && dc % kChunkElems == 0 &&
           ((c / kChunkElems) & (dc / kChunkElems)) == 0 && c + dc < Tile::kCols;
  }
};

/// How many passes shared memory needs to serve accesses that arrive together (the 8 row
/// reads of one ldmatrix matrix, say): `count` accesses of `bytes_each` bytes at the given
/// byte addresses (at most 32 accesses of at most 16 bytes). Each bank delivers one 4-byte word per pass, the same word to any number
/// of lanes, so the answer is the largest number of DIFFERENT words any one bank is asked
/// for: 1 is conflict-free, 8 is an 8-way conflict. (A model of the hardware, the usual one.)
constexpr int bank_conflict_ways(const int* byte_addresses, int count, int bytes_each) {
  constexpr int kMaxWords = kLanes * kChunkBytes / kBankBytes;  // 32 lanes × 16 bytes
  int words[kMaxWords] = {};
  int n = 0;  // distinct words requested so far
  for (int a = 0; a < count; ++a)
    for (int w = byte_addresses[a] / kBankBytes; w < (byte_addresses[a] + bytes_each) / kBankBytes; ++w) {
      bool seen = false;
      for (int i = 0; i < n; ++i) seen = seen || words[i] == w;
      if (!seen && n < kMaxWords) words[n++] = w;
    }
  int ways = 0;
  for (int bank = 0; bank < kBanks; ++bank) {
    int in_bank = 0;
    for (int i = 0; i < n; ++i) in_bank += words[i] % kBanks == bank;
    ways = in_bank > ways ? in_bank : ways;
  }
  return ways;
}

}  // namespace ft::tc
