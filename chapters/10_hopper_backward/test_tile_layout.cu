// CPU tests of chapter 10's tile layouts (no GPU needed): which accumulator register of which
// consumer thread lands where in a tile, for the shapes the kernels instantiate.
#include <gtest/gtest.h>

#include <cuda_bf16.h>

#include <algorithm>
#include <cstddef>
#include <vector>

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

}  // namespace
