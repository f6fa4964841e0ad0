// CPU tests of the paged KV cache (core/paged_kv.hpp) and of split-KV's merge
// (reference/split_kv.hpp), the two pieces of decoding that need no GPU to be right:
//   - tokens appended in ragged chunks to interleaved sequences come back, gathered through
//     the block tables, exactly as the contiguous layout holds them; pages are never shared
//     and return to the pool on release; a pool too small refuses, changing nothing;
//   - attention of a few query rows over all keys equals, to float64 rounding, the merge
//     of the same attention over disjoint key ranges (grouped heads, ragged splits, a split
//     that is empty, a row that sees no key at all).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <vector>

#include "core/paged_kv.hpp"
#include "reference/inputs.hpp"
#include "reference/reference.hpp"
#include "reference/split_kv.hpp"

namespace {

using ft::PagedKvCache;
using ft::PagedKvShape;

TEST(PagedKv, AppendedChunksGatherBackInOrder) {
  const PagedKvShape shape{/*pages=*/40, /*page_size=*/16, /*heads_kv=*/3, /*head_dim=*/8};
  PagedKvCache<float> cache(shape);
  const int H = shape.heads_kv, d = shape.head_dim;
  // Three sequences grown in turns by ragged chunks (prefill 37, then decode 1 at a time,
  // then 5), so their pages interleave in the pool.
  const std::vector<std::vector<int>> chunks = {{37, 1, 1, 5, 1}, {1, 16, 1, 1}, {100, 1}};
  std::vector<std::vector<float>> k_rows(3), v_rows(3);  // what each sequence got, [len][H][d]
  for (size_t s = 0; s < chunks.size(); ++s) cache.add_sequence();
  for (size_t turn = 0; turn < 5; ++turn)
    for (int s = 0; s < 3; ++s) {
      if (turn >= chunks[s].size()) continue;
      const int n = chunks[s][turn];
      const auto k = ft::random_uniform(size_t(n) * H * d, 100 * s + turn);
      const auto v = ft::random_uniform(size_t(n) * H * d, 100 * s + turn + 50);
      cache.append(s, k.data(), v.data(), n);
      k_rows[s].insert(k_rows[s].end(), k.begin(), k.end());
      v_rows[s].insert(v_rows[s].end(), v.begin(), v.end());
    }
  std::set<int32_t> used;
  for (int s = 0; s < 3; ++s) {
    const int len = std::accumulate(chunks[s].begin(), chunks[s].end(), 0);
    ASSERT_EQ(cache.length(s), len);
    EXPECT_EQ(int(cache.block_table(s).size()), (len + 15) / 16) << "pages a sequence holds";
    for (int32_t p : cache.block_table(s)) EXPECT_TRUE(used.insert(p).second) << "page " << p << " shared";
    for (bool values : {false, true}) {
      const auto got = cache.gather(s, values);  // [H][len][d]
      const auto& rows = values ? v_rows[s] : k_rows[s];
      for (int h = 0; h < H; ++h)
        for (int pos = 0; pos < len; ++pos)
          for (int c = 0; c < d; ++c)
            ASSERT_EQ(got[(size_t(h) * len + pos) * d + c], rows[(size_t(pos) * H + h) * d + c])
                << "sequence " << s << (values ? " V" : " K") << " head " << h << " token " << pos;
    }
  }
  EXPECT_EQ(cache.free_pages(), shape.num_pages - int(used.size()));
  cache.release(1);
  EXPECT_EQ(cache.length(1), 0);
  EXPECT_EQ(cache.free_pages(), shape.num_pages - int(used.size()) + 2);  // its 19 tokens held 2 pages
}

TEST(PagedKv, AFullPoolRefusesAndChangesNothing) {
  PagedKvCache<float> cache({/*pages=*/2, /*page_size=*/4, /*heads_kv=*/1, /*head_dim=*/2});
  const int s = cache.add_sequence();
  const std::vector<float> rows(2 * 9, 1.f);
  cache.append(s, rows.data(), rows.data(), 7);
  try {
    cache.append(s, rows.data(), rows.data(), 2);  // 9 tokens need 3 pages of 4
    ADD_FAILURE() << "a ninth token fitted in two pages of four";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("1 more pages needed, 0 free"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cache.length(s), 7);
  EXPECT_THROW(PagedKvCache<float>({0, 4, 1, 2}), std::invalid_argument);
}

TEST(PagedKv, TokenAddressesFollowTheBlockTable) {
  const PagedKvShape s{8, 16, 2, 4};
  const int32_t table[] = {5, 2, 7};
  EXPECT_EQ(ft::page_slot(table, s.page_size, 0).page, 5);
  EXPECT_EQ(ft::page_slot(table, s.page_size, 17).page, 2);
  EXPECT_EQ(ft::page_slot(table, s.page_size, 17).slot, 1);
  EXPECT_EQ(ft::page_slot(table, s.page_size, 47).page, 7);
  // HND: one head's rows of a page are contiguous, page_size·d elements.
  EXPECT_EQ(ft::paged_index(s, 2, 1, 0, 0) - ft::paged_index(s, 2, 0, 0, 0), s.page_size * s.head_dim);
  EXPECT_EQ(ft::paged_index(s, 3, 0, 0, 0) - ft::paged_index(s, 2, 0, 0, 0), s.heads_kv * s.page_size * s.head_dim);
}

// ---- split-KV's merge ---------------------------------------------------------------------

/// Reference O and lse of query head `bh` of problem p, keys [k0, k1) only (non-causal):
/// the problem cut to those keys.
void reference_on_keys(const ft::Problem& p, const ft::AttentionInputs& in, int64_t bh, int k0, int k1,
                       std::vector<double>& o, std::vector<double>& lse) {
  ft::Problem part = p;
  part.batch = 1, part.heads_q = 1, part.heads_kv = 1, part.len_kv = k1 - k0;
  const int d = p.head_dim;
  const int64_t kv = p.kv_head(bh);
  const float* q = in.Q.data() + bh * p.len_q * d;
  const float* k = in.K.data() + (kv * p.len_kv + k0) * d;
  const float* v = in.V.data() + (kv * p.len_kv + k0) * d;
  o.assign(size_t(p.len_q) * d, 0.0);
  lse.assign(p.len_q, 0.0);
  if (k1 > k0) {
    ft::reference_forward_rows(part, q, k, v, 0, 0, p.len_q, o.data(), lse.data());
  } else {
    std::fill(lse.begin(), lse.end(), -INFINITY);  // a split with no key: weight zero
  }
}

TEST(SplitKv, MergedSplitsEqualTheWholeRow) {
  ft::Problem p;
  p.batch = 2, p.heads_q = 8, p.heads_kv = 2, p.len_q = 4, p.len_kv = 1000, p.head_dim = 64;
  const auto in = ft::make_inputs(p, ft::InputKind::Uniform, 7);
  const int d = p.head_dim;
  // Ragged splits, one of them empty, as a split count that does not divide N_kv gives.
  const std::vector<int> bounds = {0, 333, 333, 700, 999, 1000};
  const int splits = int(bounds.size()) - 1;
  double worst = 0.0;
  for (int64_t bh = 0; bh < int64_t(p.batch) * p.heads_q; ++bh) {
    std::vector<double> whole_o, whole_lse;
    reference_on_keys(p, in, bh, 0, p.len_kv, whole_o, whole_lse);
    std::vector<std::vector<double>> o(splits), lse(splits);
    for (int s = 0; s < splits; ++s) reference_on_keys(p, in, bh, bounds[s], bounds[s + 1], o[s], lse[s]);
    for (int i = 0; i < p.len_q; ++i) {
      std::vector<double> o_parts(size_t(splits) * d), lse_parts(splits), merged(d);
      for (int s = 0; s < splits; ++s) {
        std::copy_n(o[s].begin() + size_t(i) * d, d, o_parts.begin() + size_t(s) * d);
        lse_parts[s] = lse[s][i];
      }
      double merged_lse = 0.0;
      ft::merge_splits(o_parts.data(), lse_parts.data(), splits, d, merged.data(), &merged_lse);
      worst = std::max(worst, std::abs(merged_lse - whole_lse[i]));
      for (int c = 0; c < d; ++c) worst = std::max(worst, std::abs(merged[c] - whole_o[size_t(i) * d + c]));
    }
  }
  EXPECT_LT(worst, 1e-12) << "merged against whole, largest difference";
}

TEST(SplitKv, ARowWithNoKeyStaysZeroWithLseMinusInfinity) {
  const double o_parts[4] = {1, 2, 3, 4}, lse_parts[2] = {-INFINITY, -INFINITY};
  double o[2] = {9, 9}, lse = 0;
  ft::merge_splits(o_parts, lse_parts, 2, 2, o, &lse);
  EXPECT_EQ(o[0], 0.0);
  EXPECT_EQ(o[1], 0.0);
  EXPECT_EQ(lse, -INFINITY);
}

}  // namespace
