// common/sm90/smem_layout.hpp on the CPU: the swizzled panels against the hardware's own
// rule for the 128-byte swizzle (address bits 4-6 XOR bits 7-9), the descriptor's bit
// fields, and the accumulator's thread map (every element of 64 × N held exactly once, in
// mma.sync's C layout warp by warp).
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "sm90/smem_layout.hpp"

namespace {

using namespace ft::sm90;

/// The copy engine's CU_TENSOR_MAP_SWIZZLE_128B, as the PTX ISA states it for a 1024-byte
/// aligned buffer: the unswizzled byte address a of (row, col) in a [rows][64] panel, with
/// bits 4-6 (the 16-byte chunk in a 128-byte row) XORed with bits 7-9 (the row mod 8).
int hardware_sw128_byte(int row, int col) {
  const int a = row * 128 + col * 2;
  return a ^ (((a >> 7) & 7) << 4);
}

TEST(Sm90Layout, PanelsAreTheHardwares128ByteSwizzle) {
  using Tile = Sw128Tile<64, 128>;
  std::set<int> seen;
  for (int r = 0; r < Tile::kRows; ++r)
    for (int c = 0; c < Tile::kCols; ++c) {
      const int at = Tile::offset(r, c);
      const int panel = c / kPanelCols;
      EXPECT_EQ(at * 2, panel * Tile::kPanelBytes + hardware_sw128_byte(r, c % kPanelCols))
          << "(" << r << ", " << c << ")";
      seen.insert(at);
    }
  EXPECT_EQ(int(seen.size()), Tile::kRows * Tile::kCols);  // a bijection onto the tile
  EXPECT_EQ(*seen.rbegin(), Tile::kRows * Tile::kCols - 1);
  EXPECT_EQ(Tile::kBytes, 64 * 128 * 2);
}

TEST(Sm90Layout, DescriptorBitFields) {
  const uint64_t d = sw128_descriptor(0x12340, 16, 1024);
  EXPECT_EQ(d & 0x3FFF, 0x12340u >> 4);         // start address, 16-byte units
  EXPECT_EQ((d >> 16) & 0x3FFF, 1u);            // LBO 16 bytes
  EXPECT_EQ((d >> 32) & 0x3FFF, 64u);           // SBO 1024 bytes
  EXPECT_EQ(d >> 62, 1u);                       // 128-byte swizzle
  EXPECT_EQ((d >> 46) & 0xFFFF, 0u);            // base offset 0: panels 1024-byte aligned
}

TEST(Sm90Layout, KStepsWalkAlongTheRowThenToTheNextPanel) {
  using Tile = Sw128Tile<128, 128>;  // a K tile of 128 keys at d = 128: two panels
  const uint32_t base = 0x4000;
  for (int ks = 0; ks < 8; ++ks) {
    const uint64_t d = k_major_descriptor<Tile>(base, ks);
    const uint32_t expect = base + (ks / 4) * Tile::kPanelBytes + (ks % 4) * 32;
    EXPECT_EQ(d & 0x3FFF, expect >> 4) << "k-step " << ks;
    EXPECT_EQ((d >> 32) & 0x3FFF, uint64_t(kAtomBytes >> 4));
  }
}

TEST(Sm90Layout, MnMajorStepsSixteenRowsAndPanelsApartAlongN) {
  using Tile = Sw128Tile<64, 128>;  // V: 64 keys (k) × d = 128 (n)
  const uint32_t base = 0x8000;
  for (int ks = 0; ks < 4; ++ks) {
    const uint64_t d = mn_major_descriptor<Tile>(base, ks);
    EXPECT_EQ(d & 0x3FFF, (base + ks * 16 * 128) >> 4) << "k-step " << ks;
    EXPECT_EQ((d >> 16) & 0x3FFF, uint64_t(Tile::kPanelBytes >> 4));  // LBO: the next panel
    EXPECT_EQ((d >> 32) & 0x3FFF, uint64_t(kAtomBytes >> 4));          // SBO: 8 rows on
  }
}

// A product's k-steps advance the descriptor of its first step (one add on the low word)
// instead of building each: the same 64 bits as building it, for every tile address a block's
// shared memory can hold (16-byte aligned, below 227 KB) and every step of the tiles used.
TEST(Sm90Layout, AdvancingADescriptorBuildsTheSameBits) {
  using KTile = Sw128Tile<128, 128>;
  using QTile = Sw128Tile<64, 64>;
  int checked = 0;
  for (uint32_t addr = 0; addr + KTile::kBytes <= 227u * 1024; addr += 1024 + 16) {
    for (int ks = 0; ks < 8; ++ks) {
      EXPECT_EQ(advance(k_major_descriptor<KTile>(addr, 0), k_major_offset<KTile>(ks)),
                k_major_descriptor<KTile>(addr, ks));
      EXPECT_EQ(advance(mn_major_descriptor<KTile>(addr, 0), mn_major_offset(ks)),
                mn_major_descriptor<KTile>(addr, ks));
      ++checked;
    }
    for (int ks = 0; ks < 4; ++ks)
      EXPECT_EQ(advance(k_major_descriptor<QTile>(addr, 0), k_major_offset<QTile>(ks)),
                k_major_descriptor<QTile>(addr, ks));
  }
  EXPECT_GT(checked, 1000);
  // Past the 256 KB the field can name, the add carries out of it where building wraps.
  EXPECT_NE(advance(k_major_descriptor<KTile>(0x3FFF0, 0), 16), k_major_descriptor<KTile>(0x40000, 0));
}

TEST(Sm90Layout, AccumulatorHoldsEveryElementOnceInMmaSyncsLayout) {
  for (int n : {64, 128}) {
    std::set<std::pair<int, int>> seen;
    for (int t = 0; t < kWarpgroupThreads; ++t)
      for (int i = 0; i < n / 2; ++i) {
        const int r = acc_row(t, i), c = acc_col(t, i);
        EXPECT_TRUE(r >= 0 && r < kMmaM && c >= 0 && c < n);
        EXPECT_TRUE(seen.insert({r, c}).second) << "(" << r << ", " << c << ") twice";
        EXPECT_EQ(r / 16, t / 32);  // warp w: rows 16w to 16w + 15
      }
    EXPECT_EQ(int(seen.size()), kMmaM * n);
  }
  // Thread 5 (warp 0, lane 5): rows 1 and 9, columns 2-3 of each 8-column block.
  EXPECT_EQ(acc_row(5, 0), 1);
  EXPECT_EQ(acc_col(5, 1), 3);
  EXPECT_EQ(acc_row(5, 2), 9);
  EXPECT_EQ(acc_col(5, 4), 10);
  EXPECT_EQ(acc_row(37, 0), 17);  // warp 1, lane 5
}

// A thread's elements lie at offsets from its first that do not depend on the thread: the dQ
// atomics compute one address a tile and reach the others by immediates.
TEST(Sm90Layout, AnElementsPlaceIsTheThreadsFirstPlusAConstant) {
  for (int t = 0; t < kWarpgroupThreads; ++t)
    for (int i = 0; i < 64; ++i) {
      EXPECT_EQ(acc_row(t, i), acc_row(t, 0) + acc_row(0, i)) << t << " " << i;
      EXPECT_EQ(acc_col(t, i), acc_col(t, 0) + acc_col(0, i)) << t << " " << i;
    }
}

}  // namespace
