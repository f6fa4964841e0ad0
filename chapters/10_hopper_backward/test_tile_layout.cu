// CPU tests of chapter 10's tile layouts (no GPU needed): which accumulator register of which
// consumer thread lands where in a tile, for the shapes the kernels instantiate.
#include <gtest/gtest.h>

#include <cuda_bf16.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "10_hopper_backward/backward_tile.cuh"
#include "10_hopper_backward/backward_traits.cuh"

namespace {

// The tiles' layouts (no GPU needed): the two consumers' dQ shares, as their accumulator
// registers map to a tile's rows and columns, cover the tile's Br × d once (by columns at
// Br = 64, by rows at Br = 128), and their dSᵀ stores cover the 128 keys × Br queries once;
// at Br = 128 each consumer's dQ rows are the queries of the dSᵀ panel it reads.
template <class Tr>
void expect_shares_cover_the_tile() {
  using ft::sm90::acc_col;
  using ft::sm90::acc_row;
  std::vector<int> dq(size_t(Tr::Br) * Tr::D, 0), ds(size_t(Tr::Bc) * Tr::Br, 0);
  for (int c = 0; c < Tr::kConsumers; ++c)
    for (int t = 0; t < ft::sm90::kWarpgroupThreads; ++t) {
      for (int i = 0; i < Tr::kDqCols / 2; ++i) {
        const int row = Tr::dq_row0(c) + acc_row(t, i), col = Tr::dq_col0(c) + acc_col(t, i);
        ASSERT_TRUE(row < Tr::Br && col < Tr::D) << "consumer " << c << " thread " << t << " register " << i;
        ++dq[size_t(row) * Tr::D + col];
        EXPECT_EQ(Tr::dq_row0(c) / ft::sm90::kPanelCols, row / ft::sm90::kPanelCols) << "dS panel of row " << row;
      }
      for (int i = 0; i < Tr::Br / 2; ++i) {  // store_ds: key 64c + acc_row, query acc_col
        const int key = c * ft::sm90::kMmaM + acc_row(t, i), query = acc_col(t, i);
        ASSERT_TRUE(key < Tr::Bc && query < Tr::Br);
        ++ds[size_t(key) * Tr::Br + query];
      }
    }
  EXPECT_EQ(std::count(dq.begin(), dq.end(), 1), std::ptrdiff_t(dq.size()));
  EXPECT_EQ(std::count(ds.begin(), ds.end(), 1), std::ptrdiff_t(ds.size()));
}
TEST(Ch10Layout, SharesCoverTheTileOnce) {
  using ch10::DqAdd;
  using ch10::SpecializedBackwardTraits;
  expect_shares_cover_the_tile<SpecializedBackwardTraits<__nv_bfloat16, 64, DqAdd::kAtomics>>();
  expect_shares_cover_the_tile<SpecializedBackwardTraits<__nv_bfloat16, 128, DqAdd::kBulk>>();
  expect_shares_cover_the_tile<
      SpecializedBackwardTraits<__nv_bfloat16, 64, DqAdd::kBulk, false, ch10::Schedule::kInOrder, 128>>();
}

// Step 8 at d = 128 reads L and D a 64-bit pair at a time (probabilities_and_ds, kPairedStats):
// in every n-block of 8 columns, a thread's registers 4j and 4j + 1 must be an even column and
// the next, and 4j + 2, 4j + 3 the same two columns (8 rows down), for both accumulator widths.
TEST(Ch10Layout, AccumulatorColumnsComeInAlignedPairs) {
  using ft::sm90::acc_col;
  using ft::sm90::acc_row;
  for (int t = 0; t < ft::sm90::kWarpgroupThreads; ++t)
    for (int j = 0; j < 128 / 8; ++j) {  // up to Br = 128 columns: 16 n-blocks
      const int i = 4 * j;
      EXPECT_EQ(acc_col(t, i) % 2, 0) << "thread " << t << " register " << i;
      EXPECT_EQ(acc_col(t, i + 1), acc_col(t, i) + 1) << "thread " << t << " register " << i + 1;
      EXPECT_EQ(acc_col(t, i + 2), acc_col(t, i)) << "thread " << t << " register " << i + 2;
      EXPECT_EQ(acc_col(t, i + 3), acc_col(t, i) + 1) << "thread " << t << " register " << i + 3;
      EXPECT_EQ(acc_row(t, i + 2), acc_row(t, i) + 8) << "thread " << t << " register " << i + 2;
    }
}

// Step 8 at d = 128 stores dSᵀ by stmatrix: register q of lane l goes to row l/4, columns 2·(l%4)
// and + 1, of the matrix whose rows lanes 8q to 8q + 7 name (stmatrix_ds_row). Every element must
// land where the 32-bit stores of steps 2-7 put it (acc_row, acc_col of register pair i = 8·kk +
// 2q), and every row address must start an 8-column block (16 bytes, which the 128-byte swizzle
// moves whole).
TEST(Ch10Layout, StmatrixStoresDsWhereTheStoresDid) {
  using ft::sm90::acc_col;
  using ft::sm90::acc_row;
  for (int lane = 0; lane < 32; ++lane)
    for (int kk = 0; kk < 128 / ft::sm90::kMmaK; ++kk) {  // up to step 6's 128 queries
      const ft::tc::RowCol named = ch10::stmatrix_ds_row(lane, kk);
      EXPECT_EQ(named.col % 8, 0) << "lane " << lane << " names a row mid-block";
      for (int q = 0; q < 4; ++q)
        for (int j = 0; j < 2; ++j) {
          const int i = 8 * kk + 2 * q + j;
          const ft::tc::RowCol row = ch10::stmatrix_ds_row(8 * q + lane / 4, kk);
          EXPECT_EQ(row.row, acc_row(lane, i)) << "lane " << lane << " k-step " << kk << " register " << q;
          EXPECT_EQ(row.col + 2 * (lane % 4) + j, acc_col(lane, i)) << "lane " << lane << " register " << q;
        }
    }
}

// Step 10 lays dQ's accumulator out a tile at a time in the consumers' register order
// (kDqTiles): every (thread, register) of a share gets its own place, a thread's
// registers 4j to 4j + 3 lie together on a 16-byte boundary, a warp's four-float stores fill
// 512 contiguous bytes, and dq_tile_element, which the conversion reads the tile back with,
// names the thread and register whose element lies at each place.
TEST(Ch10Layout, TileOrderedDqIsOneToOne) {
  constexpr int kShare = ch10::kDqShareFloats;
  std::vector<int> seen(2 * kShare, 0);
  for (int share = 0; share < 2; ++share)
    for (int t = 0; t < ft::sm90::kWarpgroupThreads; ++t)
      for (int i = 0; i < kShare / ft::sm90::kWarpgroupThreads; ++i) {
        const int at = ch10::dq_tile_offset(share, t, i);
        ASSERT_TRUE(at >= 0 && at < 2 * kShare) << "thread " << t << " register " << i;
        ++seen[at];
        if (i % 4 == 0) {
          EXPECT_EQ(at % 4, 0) << "thread " << t << " register " << i << " starts mid-16 bytes";
          EXPECT_EQ(ch10::dq_tile_offset(share, t, i) - ch10::dq_tile_offset(share, t / 32 * 32, i), 4 * (t % 32))
              << "a warp's stores are not contiguous";
        }
        const ch10::DqTileElement e = ch10::dq_tile_element(at % kShare);
        EXPECT_EQ(e.t, t);
        EXPECT_EQ(e.i, i);
      }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), std::ptrdiff_t(seen.size()));
  using Tr = ch10::SpecializedBackwardTraits<__nv_bfloat16, 128, ch10::DqAdd::kBulk, false, ch10::Schedule::kInOrder,
                                             64, /*lean=*/true, /*persistent=*/true, /*dq_tiles=*/true>;
  static_assert(Tr::kDqTiles && Tr::kDqBytes == 2 * 64 * 128 * sizeof(float), "two unpadded tiles of dQ");
}

// What the consumers store (add_dq: consumer c's registers from its first share on, at
// dq_tile_offset) is what the conversion reads back (dq_tile_place): every element of a query
// tile's dQ once, in its place. Steps 10 at both d and step 11, whose turn's one consumer
// holds the whole tile (64 registers, columns 64 on from register 32).
template <class Tr>
void expect_conversion_reads_back_the_stores(const std::vector<int>& writers) {
  std::vector<int> seen(Tr::Br * Tr::D, 0);
  for (int c : writers) {
    const int row0 = Tr::dq_row0(c), col0 = Tr::dq_col0(c), share = Tr::first_share(row0, col0);
    for (int t = 0; t < ft::sm90::kWarpgroupThreads; ++t)
      for (int i = 0; i < Tr::kDqCols / 2; ++i) {
        const int at = ch10::dq_tile_offset(share, t, i);
        ASSERT_TRUE(at >= 0 && at < Tr::Br * Tr::D) << "consumer " << c << " thread " << t << " register " << i;
        ++seen[at];
        const ft::tc::RowCol place = ch10::dq_tile_place<Tr>(at);
        EXPECT_EQ(place.row, row0 + ft::sm90::acc_row(t, i)) << "consumer " << c << " thread " << t << " register " << i;
        EXPECT_EQ(place.col, col0 + ft::sm90::acc_col(t, i)) << "consumer " << c << " thread " << t << " register " << i;
      }
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), std::ptrdiff_t(seen.size()));
}
template <int D, int Br, bool kTurns>
using TileTraits = ch10::SpecializedBackwardTraits<__nv_bfloat16, D, ch10::DqAdd::kBulk, false, ch10::Schedule::kInOrder,
                                                   Br, /*lean=*/true, /*persistent=*/true, /*dq_tiles=*/true, kTurns>;
TEST(Ch10Layout, ConversionReadsBackWhatTheConsumersStored) {
  expect_conversion_reads_back_the_stores<TileTraits<128, 64, false>>({0, 1});  // step 10, d = 128: by columns
  expect_conversion_reads_back_the_stores<TileTraits<64, 128, false>>({0, 1});  // step 10, d = 64: by rows
  expect_conversion_reads_back_the_stores<TileTraits<128, 64, true>>({0});      // step 11: turn 0's consumer
  expect_conversion_reads_back_the_stores<TileTraits<128, 64, true>>({1});      // step 11: turn 1's
}

// Step 8 computes P with no check on a tile that needs_mask clears: every (query, key) pair
// of such a tile must be visible, and so every query's L finite. Walked as the kernels walk
// them (a block of 128 keys, its two warpgroups, the query tiles from the first that sees the
// block's first key), over ragged lengths, both causal alignments and no mask; the walk must
// also find tiles of both kinds, or the test would pass without testing.
template <int Br>
void expect_unmasked_tiles_hide_nothing(int Nq, int Nk, bool causal, int offset, int* unmasked, int* masked) {
  ch10::Params<__nv_bfloat16> p{};
  p.Nq = Nq, p.Nk = Nk, p.causal = causal, p.causal_offset = offset;
  constexpr int Bc = 128, kKeys = ft::sm90::kMmaM;
  for (int k0 = 0; k0 < Nk; k0 += Bc) {
    const int first_q_tile = causal ? std::max(0, k0 - offset) / Br : 0;
    for (int c = 0; c < Bc / kKeys; ++c)
      for (int q0 = first_q_tile * Br; q0 < Nq; q0 += Br) {
        const int key_base = k0 + c * kKeys;
        if (ch10::needs_mask<Br>(p, key_base, q0)) {
          ++*masked;
          continue;
        }
        ++*unmasked;
        for (int q = q0; q < q0 + Br; ++q)
          for (int k = key_base; k < key_base + kKeys; ++k)
            ASSERT_TRUE(q < Nq && k < Nk && (!causal || k <= q + offset))
                << "query " << q << " key " << k << " in an unmasked tile, N_q " << Nq << " N_k " << Nk;
      }
  }
}
TEST(Ch10Mask, ATileLeftUnmaskedHoldsNoHiddenPair) {
  int unmasked = 0, masked = 0;
  for (int Nq : {1, 17, 64, 200, 1000})
    for (int Nk : {1, 17, 128, 300, 1000})
      for (int causal = 0; causal < 2; ++causal)
        for (int offset : {0, Nk - Nq}) {  // top-left and bottom-right alignment
          expect_unmasked_tiles_hide_nothing<64>(Nq, Nk, causal, offset, &unmasked, &masked);
          expect_unmasked_tiles_hide_nothing<128>(Nq, Nk, causal, offset, &unmasked, &masked);
        }
  EXPECT_GT(unmasked, 100);
  EXPECT_GT(masked, 100);
}

// The lesson's exercise 8: N = 4096, causal (top-left), Br = 64: 2,112 pairs, 96 masked.
TEST(Ch10Mask, CausalWalkChecksOnlyTheDiagonal) {
  int unmasked = 0, masked = 0;
  expect_unmasked_tiles_hide_nothing<64>(4096, 4096, true, 0, &unmasked, &masked);
  EXPECT_EQ(unmasked + masked, 2112);
  EXPECT_EQ(masked, 96);
}

}  // namespace
