/// @file smem_layout.hpp
/// @brief The shared-memory tile Hopper's copy engine writes and `wgmma` reads: 128-byte
/// swizzled panels, and the 64-bit matrix descriptor that tells `wgmma` where one is.
///
/// `wgmma` reads its B operand (and A, unless A comes from registers) from shared memory
/// itself: no thread loads a fragment, so the layout is not the kernel's choice but one of a
/// few the hardware knows. The one used here is the widest, the 128-byte swizzle, which the
/// copy engine (TMA) writes with CU_TENSOR_MAP_SWIZZLE_128B. It is chapter 07's swizzle
/// (sm80/swizzle.hpp: 16-byte chunk c of row r stored at chunk c XOR r % 8), over rows of
/// exactly 128 bytes (64 bf16). A tile wider than 64 columns is cut into panels of 64
/// columns, each panel its ROWS rows back to back:
///
///     Sw128Tile<ROWS, 128>:  panel 0 = columns 0-63     panel 1 = columns 64-127
///                            [ROWS][64], swizzled        [ROWS][64], swizzled
///                            <-- ROWS·128 bytes -->      <-- ROWS·128 bytes -->
///
/// Eight rows of one panel (1024 bytes, the swizzle's period) are the unit the hardware
/// steps by, so a panel must start 1024-byte aligned.
///
/// The descriptor (PTX ISA, "Matrix Descriptor Format") packs, each in units of 16 bytes:
///
///     bits  0-13  start address (shared-memory address >> 4)
///     bits 16-29  leading-dimension byte offset (LBO)
///     bits 32-45  stride-dimension byte offset (SBO)
///     bits 62-63  swizzle mode: 1 = 128-byte
///
/// and what LBO and SBO mean depends on which dimension is contiguous:
/// - K-major (the operand's rows run along k: Q for S = QKᵀ, and K itself as Kᵀ's columns):
///   a k-step of 16 elements (32 bytes) lies inside one 128-byte row, so LBO is unused; SBO
///   is the step from 8 rows to the next 8: 1024 bytes. The k-th step of 16 starts 32·k
///   bytes further into the row (the swizzle is applied to the address, so the hardware
///   finds the chunks); past 64 columns, in the next panel.
/// - MN-major (the operand's rows run along n: V in O = PV, whose rows are keys, the k of
///   that product): 16 k-rows of one step are 2 groups of 8 rows, SBO = 1024 bytes apart;
///   LBO is the step from one 64-column panel to the next along n: ROWS·128 bytes.
#pragma once

#include <cstdint>

#include "sm80/swizzle.hpp"  // ft::tc::SwizzledTile, FT_TC_HD

namespace ft::sm90 {

constexpr int kSwizzleBytes = 128;  ///< the swizzle's row: 8 chunks of 16 bytes
constexpr int kPanelCols = kSwizzleBytes / tc::kElemBytes;  ///< 64 bf16/fp16 columns a panel
constexpr int kAtomRows = tc::kSwizzleRows;                 ///< 8 rows: the swizzle's period
constexpr int kAtomBytes = kAtomRows * kSwizzleBytes;       ///< 1024: a panel's alignment
constexpr int kMmaK = 16;  ///< wgmma's k for 16-bit inputs: one step is 16 columns, 32 bytes

/// ROWS × COLS 16-bit elements as COLS / 64 panels of [ROWS][64], each swizzled.
template <int ROWS, int COLS>
struct Sw128Tile {
  static_assert(ROWS % kAtomRows == 0, "whole 8-row atoms");
  static_assert(COLS % kPanelCols == 0, "whole 128-byte panels");
  static constexpr int kRows = ROWS;
  static constexpr int kCols = COLS;
  static constexpr int kPanels = COLS / kPanelCols;
  static constexpr int kPanelElems = ROWS * kPanelCols;
  static constexpr int kPanelBytes = kPanelElems * tc::kElemBytes;
  static constexpr int kBytes = kPanels * kPanelBytes;
  /// Element (row, col)'s index in the tile.
  FT_TC_HD static constexpr int offset(int row, int col) {
    return col / kPanelCols * kPanelElems + tc::SwizzledTile<kPanelCols>::offset(row, col % kPanelCols);
  }
};

/// The descriptor of a 128-byte-swizzled operand at shared-memory address `smem_addr`.
FT_TC_HD constexpr uint64_t sw128_descriptor(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  constexpr uint64_t kSwizzle128 = 1;
  return uint64_t((smem_addr & 0x3FFFF) >> 4) | uint64_t((lbo_bytes >> 4) & 0x3FFF) << 16 |
         uint64_t((sbo_bytes >> 4) & 0x3FFF) << 32 | kSwizzle128 << 62;
}

/// Byte offset of k-step `ks` (16 columns each) of a K-major operand (rows along M or N, k
/// contiguous) in a Sw128Tile: its panel, then 32 bytes a step inside the panel's swizzled
/// rows (the hardware applies the swizzle to the address it is given).
template <class Tile>
FT_TC_HD constexpr uint32_t k_major_offset(int ks) {
  const int col = ks * kMmaK;
  return uint32_t(col / kPanelCols * Tile::kPanelBytes) + uint32_t(col % kPanelCols * tc::kElemBytes);
}

/// Byte offset of k-step `ks` (16 rows each) of an MN-major operand (rows along k, n
/// contiguous): 16 rows of 128 bytes a step.
FT_TC_HD constexpr uint32_t mn_major_offset(int ks) { return uint32_t(ks * kMmaK * kSwizzleBytes); }

/// K-major operand, k-step `ks`, of a Sw128Tile at `tile_addr`. LBO unused (1 by convention).
template <class Tile>
FT_TC_HD constexpr uint64_t k_major_descriptor(uint32_t tile_addr, int ks) {
  return sw128_descriptor(tile_addr + k_major_offset<Tile>(ks), 16, kAtomBytes);
}

/// MN-major operand, k-step `ks`, of a Sw128Tile at `tile_addr`: the step's first row,
/// panels kPanelBytes apart along n.
template <class Tile>
FT_TC_HD constexpr uint64_t mn_major_descriptor(uint32_t tile_addr, int ks) {
  return sw128_descriptor(tile_addr + mn_major_offset(ks), Tile::kPanelBytes, kAtomBytes);
}

/// `desc` moved on by `bytes` (a multiple of 16), as k_major_descriptor(addr + bytes) would
/// build it: the start address is the low 14 bits in 16-byte units, and an operand inside one
/// block's shared memory (below 256 KB: 0x40000) never carries out of them, so one 32-bit add
/// on the low word moves it. A product's k-steps advance one descriptor built per tile
/// instead of building each (a mask, a shift and an or on every step's address).
FT_TC_HD constexpr uint64_t advance(uint64_t desc, uint32_t bytes) {
  return (desc & 0xFFFFFFFF00000000ull) | uint32_t(uint32_t(desc) + (bytes >> 4));
}

#if defined(__CUDACC__)
/// The first `kAlign`-aligned byte at or after `raw`, the kernel's dynamic shared memory
/// (`extern __shared__`), whose start CUDA aligns to 16 bytes only. Computed as an offset
/// added to `raw` itself, so that the compiler still knows the result and every pointer
/// derived from it lie in shared memory, and emits shared-memory loads and stores (LDS,
/// STS). Rounded as an integer and cast back instead, the pointer is generic, and so is every
/// access through it (LD.E, ST.E: an address-space check on each, and no reordering past
/// global accesses).
template <int kAlign = kAtomBytes>
__device__ __forceinline__ uint8_t* align_shared(uint8_t* raw) {
  const uint32_t at = uint32_t(__cvta_generic_to_shared(raw));
  return raw + (kAlign - at % kAlign) % kAlign;
}
#endif

// ---- The accumulator: which thread of the warpgroup holds which element ---------------
//
// wgmma.m64nNk16's float accumulator is 64 rows × N columns over 128 threads: warp w of
// the warpgroup holds rows 16w to 16w + 15, laid out like mma.sync's C fragment repeated
// along n (sm80/fragment.hpp): lane l holds rows 16w + l/4 and 16w + l/4 + 8, and in each
// 8-column block j the columns 8j + 2(l%4) and +1. Register 4j + h of N/2:
//   h = 0, 1: row 16w + l/4,     column 8j + 2(l%4) + h
//   h = 2, 3: row 16w + l/4 + 8, column 8j + 2(l%4) + h - 2

constexpr int kWarpgroupThreads = 128;  ///< 4 warps issue one wgmma together
constexpr int kMmaM = 64;               ///< wgmma's m: 16 rows a warp

/// Row of accumulator register i held by warpgroup thread t.
FT_TC_HD constexpr int acc_row(int t, int i) { return t / 32 * 16 + t % 32 / 4 + (i % 4 >= 2 ? 8 : 0); }
/// Column of accumulator register i held by warpgroup thread t.
FT_TC_HD constexpr int acc_col(int t, int i) { return i / 4 * 8 + t % 4 * 2 + i % 2; }

}  // namespace ft::sm90
