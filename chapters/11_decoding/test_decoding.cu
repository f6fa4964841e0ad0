// GPU tests of chapter 11: every variant, bf16 and fp16, d = 64 and 128, against the float64
// reference under the same-precision rule (outputs poisoned first): query rows 1, 4 and 16,
// key lengths 1, 17, 1000 and 5000 (several splits, a ragged last split), causal aligned
// bottom-right (the decode position) and not, multi-head, grouped (8 query heads a
// key/value head) and multi-query (32 on 1: one m16 tile of rows a block at these lengths,
// two only where forced, below), batches of several sequences; and the refusals (a prompt
// longer than 16 rows, float32, other head dims).
// The paged cache: sequences of mixed lengths in one batch, appended in interleaved chunks
// so that their pages are scattered through the pool, pages of 1, 16 and 256 tokens, each
// sequence against the float64 reference of its own contiguous problem; and the tables
// check_paged refuses (no GPU needed). Step 6 (decode_wgmma, Hopper only) runs in every case
// above as a variant, and under fastest and the paged cache with FT_CH11_WGMMA and
// FT_CH11_WARPGROUPS forcing each form (WgmmaOrNotDecodeEveryLayout), and with its splits merged in
// a cluster, after a grid barrier or through the workspace (FT_CH11_CLUSTER, FT_CH11_GRID_MERGE:
// EveryMergeDecodesEveryLayout).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "11_decoding/decode_kernels.cuh"  // kMaxQueryRows
#include "11_decoding/decoding.hpp"
#include "core/check.cuh"
#include "core/paged_kv.hpp"
#include "device/buffer.cuh"
#include "device/fill.cuh"
#include "device/launch.cuh"  // ft::device_sm
#include "device/timer.cuh"
#include "harness/testing.hpp"
#include "harness/verify.hpp"
#include "reference/precision.hpp"

namespace {

#define REQUIRE_GPU()                                                       \
  do {                                                                      \
    std::string why_;                                                       \
    if (!ft::gpu_available(&why_)) GTEST_SKIP() << "needs a GPU: " << why_; \
  } while (0)

ft::Problem decode_problem(int batch, int heads, int heads_kv, int len_q, int len_kv, int d, bool causal,
                           ft::DType t) {
  return ft::with_kv(ft::make_problem(batch, heads, len_q, d, causal, t), len_kv, heads_kv,
                     ft::CausalAlign::BottomRight);
}

// `fastest` against the float64 reference on every layout the env-forced tests sweep: d = 64
// and 128, 1, 4 and 16 query rows, 8 key/value heads and one (32 query heads), 1,000 keys.
void expect_fastest_every_layout(int batch, const std::string& setting) {
  for (int d : {64, 128})
    for (int len_q : {1, 4, 16})
      for (int heads_kv : {8, 1}) {
        const ft::Problem p = decode_problem(batch, 32, heads_kv, len_q, 1000, d, true, ft::DType::BFloat16);
        SCOPED_TRACE(setting + ", " + p.describe());
        ft::testing::expect_forward_correct(ch11::fastest(), p);
      }
}

// One test a variant (ctest runs them side by side: the whole grid at once took 186 s on the
// H200 machine, most of it the float64 references).
class Ch11Variant : public ::testing::TestWithParam<std::string> {};

TEST_P(Ch11Variant, MatchesReferenceOnDecodeShapes) {
  REQUIRE_GPU();
  for (const auto& impl : ch11::forward_impls()) {
    if (impl.variant != GetParam()) continue;
    for (ft::DType t : impl.dtypes)
      for (int d : impl.head_dims)
        for (int len_q : {1, 4, 16})
          for (int len_kv : {1, 17, 1000, 5000})
            for (int heads_kv : {32, 4, 1})
              for (bool causal : {false, true}) {
                if (len_kv < len_q) continue;  // a decode step's cache holds its own rows
                if (t == ft::DType::Float16 && (len_kv == 17 || heads_kv == 4)) continue;  // fp16: fewer cases
                const ft::Problem p = decode_problem(2, 32, heads_kv, len_q, len_kv, d, causal, t);
                SCOPED_TRACE(impl.variant + ", " + p.describe());
                ft::testing::expect_forward_correct(impl, p);
              }
  }
}

std::vector<std::string> variant_names() {
  std::vector<std::string> names;
  for (const auto& impl : ch11::forward_impls()) names.push_back(impl.variant);
  return names;
}

INSTANTIATE_TEST_SUITE_P(AllVariants, Ch11Variant, ::testing::ValuesIn(variant_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// K and V as a decode loop keeps them: views of a cache [B, H_kv, capacity, d] filled to N_k
// rows (capacity 5000 here), Q and O contiguous; every step, against the reference.
TEST(Ch11, ReadsViewsOfALongerCache) {
  REQUIRE_GPU();
  for (const auto& impl : ch11::forward_impls())
    for (int d : impl.head_dims)
      for (int len_kv : {1, 1000}) {
        const ft::Problem p = decode_problem(2, 8, 2, 1, len_kv, d, true, ft::DType::BFloat16);
        ft::Layout cache = ft::contiguous_layout(p);
        constexpr int kCapacity = 5000;  // rows each head of the cache could hold
        cache.K = cache.V = {int64_t(p.heads_kv) * kCapacity * d, int64_t(kCapacity) * d, d};
        SCOPED_TRACE(impl.variant + ", " + p.describe());
        ft::testing::expect_forward_correct(impl, p, ft::InputKind::Uniform, ft::testing::kDtypeTolerance, &cache);
      }
}

// The views chapter 11 refuses, before any launch (no GPU needed).
TEST(Ch11, RefusesViewsItDoesNotRead) {
  const ft::Problem p = decode_problem(2, 8, 2, 1, 64, 64, true, ft::DType::BFloat16);
  const ft::Layout contiguous = ft::contiguous_layout(p);
  ft::ForwardArgs a{};
  auto refused = [&](ft::Layout l, const std::string& says) {
    a.layout = &l;
    try {
      ch11::fastest().run(p, a, nullptr);
      ADD_FAILURE() << "accepted; expected a refusal saying \"" << says << "\"";
    } catch (const ft::Unsupported& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  ft::Layout l = contiguous;
  l.Q.row = 128;  // Q's rows apart: not contiguous
  refused(l, "reads Q and writes O contiguous");
  l = contiguous;
  l.V.head *= 2;  // V's cache longer than K's
  refused(l, "K and V laid out alike");
  l = contiguous;
  l.K.row = l.V.row = 128;  // gaps between rows
  refused(l, "whole rows of d elements");
  l = contiguous;
  l.K.head = l.V.head = 64 * 63;  // heads overlapping: shorter than the 64 rows
  refused(l, "each head's rows in one run");
}

TEST(Ch11, SplitsFollowTheGpuAndTheKeys) {
  EXPECT_EQ(ch11::choose_splits(132 * 4, 100000, 132, 4), 1);      // the grid already fills the SMs
  EXPECT_EQ(ch11::choose_splits(132 * 4 + 1, 100000, 132, 4), 1);  // and more: still 1
  EXPECT_EQ(ch11::choose_splits(8, 100000, 132, 4), 66);           // 8 heads: 66 splits, 528 blocks
  EXPECT_EQ(ch11::choose_splits(32, 100000, 132, 4), 16);          // 512 blocks: 17 would make 544
  EXPECT_EQ(ch11::choose_splits(32, 100000, 132, 5), 20);          // 5 a SM: 640 of 660 places
  EXPECT_EQ(ch11::choose_splits(8, 1000, 132, 4), 4);              // at most one split a 256 keys
  EXPECT_EQ(ch11::choose_splits(8, 1000, 132, 4, 128), 8);         // step 6: one 128-key tile a split
  EXPECT_EQ(ch11::choose_splits(8, 1000, 132, 4, 0), 1);           // a minimum of no keys: refused, one split
  EXPECT_EQ(ch11::choose_splits(1, 1 << 20, 132, 4), 128);         // at most 128
  EXPECT_EQ(ch11::choose_splits(1, 1, 132, 4), 1);
  EXPECT_EQ(ch11::choose_splits(8, 100000, 132, 0), 1);            // a kernel that cannot run: no split
}

// An environment variable set for a test's scope only (the measurement knobs FT_CH11_*), its
// value before (or its absence) restored after.
struct ScopedEnv {
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* before = std::getenv(name)) before_ = before, had_ = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() { had_ ? setenv(name_, before_.c_str(), 1) : unsetenv(name_); }
  const char* name_;
  std::string before_;
  bool had_ = false;
};

// The merge with many splits: 33 (two rows a merge block, four slots of splits a row) and
// 128 (one row a block, eight slots of 16) forced (FT_CH11_SPLITS) over 32,805 keys, every
// variant that splits. decode_mma rounds a split up to whole 128-key tiles, so at 128 its
// last splits are empty (lse −∞).
TEST(Ch11, MergesManySplits) {
  REQUIRE_GPU();
  for (const char* splits : {"33", "128"}) {
    const ScopedEnv forced("FT_CH11_SPLITS", splits);
    for (const auto& impl : ch11::forward_impls()) {
      if (impl.variant == "one_block") continue;  // one block the whole key range: no merge
      const ft::Problem p = decode_problem(1, 8, 2, 1, 32805, 128, true, ft::DType::BFloat16);
      SCOPED_TRACE(impl.variant + ", " + std::string(splits) + " splits, " + p.describe());
      ft::testing::expect_forward_correct(impl, p);
    }
  }
}


// The merge's blocks take 8, 4, 2 or 1 rows: as many as leave each row's slots enough to load
// every split in one batch of 16 a thread (8 slots a row at d = 128 with one row a block).
TEST(Ch11, MergeRowsLeaveEachRowItsSplitsInOneBatch) {
  EXPECT_EQ(ch11::merge_rows(2, 128), 8);    // one slot a row: 16 splits a batch
  EXPECT_EQ(ch11::merge_rows(16, 128), 8);
  EXPECT_EQ(ch11::merge_rows(17, 128), 4);
  EXPECT_EQ(ch11::merge_rows(66, 128), 1);   // B = 1, 32 heads on one: eight slots
  EXPECT_EQ(ch11::merge_rows(128, 128), 1);  // kMaxSplits: 8 slots of 16
  EXPECT_EQ(ch11::merge_rows(32, 64), 8);    // d = 64: twice the slots
  EXPECT_EQ(ch11::merge_rows(33, 64), 4);
  EXPECT_EQ(ch11::merge_rows(128, 64), 2);
}

// Every merge block shape merge_rows chooses, against the reference: splits forced so that
// the blocks take 8, 4, 2 and 1 rows at d = 128 (8, 8, 4 and 2 at d = 64, where one row a
// block would need more than kMaxSplits), over 15 query rows (3 heads on one, 5 query rows),
// which no block of several rows divides: the last block's rows past the 15th must write
// nothing and still meet.
TEST(Ch11, MergesEveryBlockShape) {
  REQUIRE_GPU();
  for (int d : {64, 128})
    for (const char* splits : {"2", "17", "33", "70"}) {
      const ScopedEnv forced("FT_CH11_SPLITS", splits);
      for (const auto& impl : ch11::forward_impls()) {
        if (impl.variant == "one_block") continue;  // one block the whole key range: no merge
        const ft::Problem p = decode_problem(1, 3, 1, 5, 9000, d, true, ft::DType::Float16);
        SCOPED_TRACE(impl.variant + ", " + std::string(splits) + " splits, " + p.describe());
        ft::testing::expect_forward_correct(impl, p);
      }
    }
}


TEST(Ch11, TwoRowTilesWhereFewLongSplitsFillTheGpu) {
  EXPECT_EQ(ch11::mma_row_tiles(32, 32768, 66), 1);   // B = 1, 32 heads on one: splits fill the GPU
  EXPECT_EQ(ch11::mma_row_tiles(32, 32768, 4), 2);    // B = 16: the heads do, 8,192 keys a split
  EXPECT_EQ(ch11::mma_row_tiles(32, 8192, 4), 1);     // 2,048 keys a split: too short
  EXPECT_EQ(ch11::mma_row_tiles(32, 8192, 2), 2);     // 4,096: long enough
  EXPECT_EQ(ch11::mma_row_tiles(32, 32768, 8), 2);    // 8 splits of 4,096: both at the limit
  EXPECT_EQ(ch11::mma_row_tiles(32, 1 << 20, 9), 1);  // 9 splits
  EXPECT_EQ(ch11::mma_row_tiles(128, 8192, 1), 2);    // four query rows, 32 heads on one, B = 16
  EXPECT_EQ(ch11::mma_row_tiles(16, 32768, 1), 1);    // 16 rows: one tile holds them
  EXPECT_EQ(ch11::mma_row_tiles(4, 32768, 1), 1);
}

TEST(Ch11, RefusesWhatItDoesNotDecode) {
  for (const auto& impl : ch11::forward_impls()) {
    ft::Problem p = decode_problem(1, 8, 8, 1, 64, 64, false, ft::DType::Float32);
    EXPECT_THROW(ft::check_supported(impl, p), ft::Unsupported) << impl.variant;
    p = decode_problem(1, 8, 8, 1, 64, 96, false, ft::DType::BFloat16);
    EXPECT_THROW(ft::check_supported(impl, p), ft::Unsupported) << impl.variant;
  }
}

// The workspace query refuses what a launch would, more than kMaxQueryRows query rows a
// sequence, so that a caller that asks it before allocating (flashtut.forward, the programs'
// memory check) hears why; host code only, no GPU needed.
TEST(Ch11, WorkspaceQueryRefusesMoreQueryRowsThanADecodeTakes) {
  for (const auto& impl : ch11::forward_impls()) {
    for (int len_q : {1, ch11::kMaxQueryRows})
      EXPECT_NO_THROW(impl.workspace_bytes(decode_problem(1, 32, 8, len_q, 4096, 128, true, ft::DType::BFloat16)))
          << impl.variant << ", N_q = " << len_q;
    const ft::Problem p = decode_problem(1, 32, 8, ch11::kMaxQueryRows + 1, 4096, 128, true, ft::DType::BFloat16);
    EXPECT_THROW(impl.workspace_bytes(p), ft::Unsupported) << impl.variant;
  }
}

/// One paged decode step: B sequences of lengths `lens` (each its own seeded inputs, as a
/// batch-1 problem of that length), appended chunk by chunk in turn, then decoded together
/// and each checked against its own reference under the same-precision rule.
void expect_paged_correct(ft::DType t, int d, int heads, int heads_kv, int len_q, bool causal, int page_size,
                          const std::vector<int>& lens) {
  const int B = int(lens.size()), longest = *std::max_element(lens.begin(), lens.end());
  std::vector<ft::Problem> seq;
  std::vector<ft::AttentionInputs> in;
  for (int b = 0; b < B; ++b) {
    seq.push_back(decode_problem(1, heads, heads_kv, len_q, lens[b], d, causal, t));
    in.push_back(ft::reference_inputs(seq[b], ft::InputKind::Uniform, 1000 + b));
  }
  const int pages_per_seq = (longest + page_size - 1) / page_size;
  ft::PagedKvCache<float> cache({B * pages_per_seq + 3, page_size, heads_kv, d});  // a few pages spare
  for (int b = 0; b < B; ++b) cache.add_sequence();
  constexpr int kChunk = 37;  // tokens a sequence appends in turn: pages interleave
  for (int at = 0; at < longest; at += kChunk)
    for (int b = 0; b < B; ++b) {
      const int count = std::min(kChunk, lens[b] - at);
      if (count <= 0) continue;
      std::vector<float> k(size_t(count) * heads_kv * d), v(k.size());  // [count][H_kv][d]
      for (int i = 0; i < count; ++i)
        for (int h = 0; h < heads_kv; ++h)
          for (int c = 0; c < d; ++c) {
            const size_t src = (size_t(h) * lens[b] + at + i) * d + c, dst = (size_t(i) * heads_kv + h) * d + c;
            k[dst] = in[b].K[src];
            v[dst] = in[b].V[src];
          }
      cache.append(b, k.data(), v.data(), count);
    }
  // Entries past a sequence's own pages: the pool's last page, a spare no sequence holds (its
  // tokens none of the references'). The kernels may load them (first_entries_end), never read
  // through them.
  std::vector<int32_t> tables(size_t(B) * pages_per_seq, int32_t(cache.shape().num_pages - 1)),
      seq_lens(lens.begin(), lens.end());
  std::vector<float> q;
  for (int b = 0; b < B; ++b) {
    std::copy(cache.block_table(b).begin(), cache.block_table(b).end(), tables.begin() + int64_t(b) * pages_per_seq);
    q.insert(q.end(), in[b].Q.begin(), in[b].Q.end());
  }
  const ft::Problem p = decode_problem(B, heads, heads_kv, len_q, longest, d, causal, t);
  ch11::check_paged(p, cache.shape(), tables, pages_per_seq, seq_lens);

  ft::DeviceTensor Q(t, q.size()), K(t, cache.K().size()), V(t, cache.V().size()), O(t, q.size());
  Q.upload(q);
  K.upload(cache.K());
  V.upload(cache.V());
  ft::DeviceBuffer<int32_t> dtables(tables.size()), dlens(seq_lens.size());
  dtables.upload(tables);
  dlens.upload(seq_lens);
  ft::DeviceBuffer<float> lse(size_t(p.rows()));
  ft::DeviceBuffer<float> ws(std::max<size_t>(1, ch11::paged_workspace_bytes(p) / sizeof(float)));
  O.poison();
  lse.poison();
  ws.poison();  // the splits' partial results: each split writes its own, even an empty one
  ch11::PagedDecodeArgs a;
  a.Q = Q.get(), a.K_pool = K.get(), a.V_pool = V.get(), a.O = O.get(), a.lse = lse.get();
  a.block_tables = dtables.get(), a.seq_lens = dlens.get(), a.pages_per_seq = pages_per_seq;
  a.pool = cache.shape(), a.workspace = ws.get();
  ch11::decode_paged(p, a, 0);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> o = O.download(), l = lse.download();

  const size_t per_o = size_t(heads) * len_q * d, per_l = size_t(heads) * len_q;
  for (int b = 0; b < B; ++b) {
    const ft::Reference& ref = ft::cached_reference(seq[b], ft::InputKind::Uniform, 1000 + b, false);
    const double cap = ft::fixed_tolerance(t);
    const double err_o = ft::relative_l2(o.data() + b * per_o, ref.tensors.O.data(), per_o);
    const double err_l = ft::relative_l2(l.data() + b * per_l, ref.tensors.lse.data(), per_l);
    EXPECT_LE(err_o, ft::testing::allowed_error(ref.baseline.O, t, cap))
        << "sequence " << b << " (" << lens[b] << " keys): O";
    EXPECT_LE(err_l, ft::testing::allowed_error(ref.baseline.lse, ft::DType::Float32, cap))
        << "sequence " << b << " (" << lens[b] << " keys): lse";
  }
}

TEST(Ch11Paged, MixedLengthsMatchTheirReferences) {
  REQUIRE_GPU();
  for (int d : {64, 128})
    for (int page_size : {1, 16, 256})
      for (int heads_kv : {8, 2, 1})
        for (int len_q : {1, 4})
          for (bool causal : {false, true}) {
            SCOPED_TRACE("d=" + std::to_string(d) + " page_size=" + std::to_string(page_size) + " heads_kv=" +
                         std::to_string(heads_kv) + " len_q=" + std::to_string(len_q) +
                         (causal ? " causal" : ""));
            // The first sequence is as short as a decode step allows; 17 and 300 end inside
            // a page; 1000 is several splits.
            expect_paged_correct(ft::DType::BFloat16, d, 8, heads_kv, len_q, causal, page_size,
                                 {len_q, 17, 1000, 300});
          }
  expect_paged_correct(ft::DType::Float16, 128, 8, 2, 1, true, 16, {1, 600});
}

// decode_mma with either row tiles (FT_CH11_ROW_TILES), whatever mma_row_tiles would choose
// (one for these short caches): one tile a block for 32 and 128 rows a head (blocks side by
// side), two for 4 rows (28 zero rows, never written); the contiguous cache and the paged one.
TEST(Ch11, EitherRowTilesDecodeEveryLayout) {
  REQUIRE_GPU();
  for (const char* tiles : {"1", "2"}) {
    const ScopedEnv forced("FT_CH11_ROW_TILES", tiles);
    for (int d : {64, 128})
      for (int len_q : {1, 4})
        for (int heads_kv : {8, 1}) {
          const ft::Problem p = decode_problem(2, 32, heads_kv, len_q, 1000, d, true, ft::DType::BFloat16);
          SCOPED_TRACE(std::string(tiles) + " row tiles, " + p.describe());
          ft::testing::expect_forward_correct(ch11::fastest(), p);
        }
    SCOPED_TRACE(std::string(tiles) + " row tiles, paged, 32 rows a key/value head");
    expect_paged_correct(ft::DType::BFloat16, 128, 8, 1, 4, true, 16, {4, 17, 1000, 300});
  }
}

// Step 6's kernel, decode_wgmma, where the last step chooses it and where it does not
// (FT_CH11_WGMMA=1 forces it on every shape, 0 never), with one warpgroup a block, two, or
// wgmma_warpgroups' choice (FT_CH11_WARPGROUPS): 4 to 512 rows a key/value head (a block's
// rows partly zero queries, never written, or several blocks side by side), forced splits
// of which some hold no key (1,000 keys in 7 splits of 256), the contiguous cache and pages
// of 1, 16 and 256 tokens with mixed lengths.
TEST(Ch11, WgmmaOrNotDecodeEveryLayout) {
  REQUIRE_GPU();
  if (ft::device_sm() != 90) GTEST_SKIP() << "step 6's wgmma runs on Hopper (sm_90) alone";
  for (const char* wgmma : {"1", "0"})
    for (const char* warpgroups : {"", "1", "2"}) {
      if (*wgmma == '0' && *warpgroups) continue;  // step 5 has no warpgroups
      const ScopedEnv forced("FT_CH11_WGMMA", wgmma), blocks("FT_CH11_WARPGROUPS", warpgroups);
      ASSERT_EQ(ch11::uses_wgmma(decode_problem(1, 32, 32, 1, 100, 128, true, ft::DType::BFloat16)), *wgmma == '1');
      const std::string setting = std::string("FT_CH11_WGMMA=") + wgmma + " FT_CH11_WARPGROUPS='" + warpgroups + "'";
      for (const char* splits : {"", "7", "128"}) {
        const ScopedEnv split_count("FT_CH11_SPLITS", splits);
        expect_fastest_every_layout(2, setting + ", splits '" + splits + "'");
      }
      // Paged, with the heuristic's splits and with one (a block walks all eight tiles of a
      // 1,000-key sequence: two warpgroups' row offsets in shared memory reused tile after tile).
      for (const char* splits : {"", "1"})
        for (int page_size : {1, 16, 256}) {
          const ScopedEnv split_count("FT_CH11_SPLITS", splits);
          SCOPED_TRACE(setting + ", paged, splits '" + splits + "', pages of " + std::to_string(page_size));
          expect_paged_correct(ft::DType::BFloat16, 128, 32, 1, 4, true, page_size, {4, 17, 1000, 300});
          expect_paged_correct(ft::DType::Float16, 64, 32, 1, 2, false, page_size, {600, 2});
        }
    }
}

TEST(Ch11, WgmmaFromSixteenRowsFromFourOnShortCachesTwoWarpgroupsWhereSplitsAreLong) {
  // K and V of B sequences of H_kv heads and n keys at d = 128 in bf16: 2·B·H_kv·n·128·2 bytes.
  auto cache = [](int64_t batch, int64_t heads_kv, int64_t keys) { return 2 * batch * heads_kv * keys * 128 * 2; };
  EXPECT_FALSE(ch11::wgmma_pays(1, cache(1, 32, 128)));  // one row: step 5 on any cache
  EXPECT_FALSE(ch11::wgmma_pays(2, cache(1, 16, 256)));  // 2 rows (32 heads on 16), 2 MB
  EXPECT_TRUE(ch11::wgmma_pays(4, cache(1, 8, 1024)));   // 32 heads on 8, one query row: 4 MB
  EXPECT_TRUE(ch11::wgmma_pays(4, cache(8, 8, 1024)));   // 32 MB, the largest short cache
  EXPECT_FALSE(ch11::wgmma_pays(4, cache(16, 8, 1024)));  // 64 MB: step 5
  EXPECT_TRUE(ch11::wgmma_pays(8, cache(16, 4, 1024)));   // 32 heads on 4, 32 MB
  EXPECT_FALSE(ch11::wgmma_pays(8, cache(16, 4, 32768)));
  EXPECT_TRUE(ch11::wgmma_pays(16, cache(128, 8, 131072)));  // 32 heads on 8, four query rows
  EXPECT_TRUE(ch11::wgmma_pays(32, cache(1, 1, 1024)));   // 32 heads on one, one query row
  EXPECT_TRUE(ch11::wgmma_pays(64, cache(1, 1, 1)));      // a warpgroup's 64 rows
  EXPECT_TRUE(ch11::wgmma_pays(128, cache(128, 1, 131072)));  // 32 heads on one, four query rows
  EXPECT_EQ(ch11::keys_a_split(131072, 128), 1024);
  EXPECT_EQ(ch11::keys_a_split(1000, 7), 256);  // 143 keys, rounded up to whole tiles
  EXPECT_EQ(ch11::keys_a_split(1, 1), 128);
  // wgmma_warpgroups(rows, keys a split of the two-warpgroup grid)
  EXPECT_EQ(ch11::wgmma_warpgroups(16, 1 << 17), 1);
  EXPECT_EQ(ch11::wgmma_warpgroups(64, 1 << 17), 1);  // one warpgroup's rows
  EXPECT_EQ(ch11::wgmma_warpgroups(65, 1024), 2);
  EXPECT_EQ(ch11::wgmma_warpgroups(128, 32768), 2);   // 32 heads on one, four query rows, B = 128
  EXPECT_EQ(ch11::wgmma_warpgroups(128, 1024), 2);    // B = 1 at 128k keys: 128 splits
  EXPECT_EQ(ch11::wgmma_warpgroups(128, 896), 1);
  EXPECT_EQ(ch11::wgmma_warpgroups(128, 512), 1);     // B = 16 at 4k keys
  EXPECT_EQ(ch11::wgmma_warpgroups(128, 256), 1);     // B = 1 at 32k keys
  EXPECT_EQ(ch11::wgmma_warpgroups(512, 4096), 2);
}

// Step 6's splits merged each of its three ways, forced: in a thread block cluster
// (FT_CH11_CLUSTER=1: wherever 2 to 8 splits and a cluster fits), after a barrier across the
// grid (FT_CH11_GRID_MERGE=1: wherever the grid runs at once), or through the workspace and
// decode_merge (both 0); and by default (both unset): 1,000 keys in 2, 7 (three of
// them empty: 256 keys a split), 8 and 33 splits (the last two past a cluster), 4 to 512 rows
// a key/value head (one to eight blocks of one or two warpgroups a head), the contiguous
// cache and pages of mixed lengths; a grid whose blocks each merge several rows (512 rows on
// 64 blocks); and a grid of more clusters, or more blocks, than the GPU runs at once (forced,
// the clusters run in waves, the grid's merge is refused for the workspace's).
TEST(Ch11, EveryMergeDecodesEveryLayout) {
  REQUIRE_GPU();
  if (ft::device_sm() != 90) GTEST_SKIP() << "step 6's wgmma runs on Hopper (sm_90) alone";
  const ScopedEnv wgmma("FT_CH11_WGMMA", "1");
  const std::pair<const char*, const char*> merges[] = {{"1", "0"}, {"0", "1"}, {"0", "0"}, {"", ""}};
  for (const auto& [cluster, grid] : merges)
    for (const char* warpgroups : {"1", "2"}) {
      const ScopedEnv in_cluster("FT_CH11_CLUSTER", cluster), in_grid("FT_CH11_GRID_MERGE", grid),
          blocks("FT_CH11_WARPGROUPS", warpgroups);
      const std::string setting = std::string("FT_CH11_CLUSTER='") + cluster + "' FT_CH11_GRID_MERGE='" + grid +
                                  "' FT_CH11_WARPGROUPS=" + warpgroups;
      for (const char* splits : {"2", "7", "8", "33", ""}) {
        const ScopedEnv split_count("FT_CH11_SPLITS", splits);
        expect_fastest_every_layout(1, setting + ", splits '" + splits + "'");
        SCOPED_TRACE(setting + ", paged, splits '" + splits + "'");
        expect_paged_correct(ft::DType::BFloat16, 128, 32, 1, 4, true, 16, {4, 17, 1000, 300});
        expect_paged_correct(ft::DType::Float16, 64, 32, 8, 1, false, 1, {600, 2});
      }
      for (int d : {64, 128}) {
        const ScopedEnv split_count("FT_CH11_SPLITS", "2");  // 32 key/value heads, one block each: 64 blocks
        const ft::Problem several_rows = decode_problem(4, 32, 8, 4, 1000, d, true, ft::DType::BFloat16);
        SCOPED_TRACE(setting + ", splits '2', " + several_rows.describe());
        ft::testing::expect_forward_correct(ch11::fastest(), several_rows);
      }
      // More clusters than run at once (256 of 8; an H100 holds 15 to 45), and 2,048 or 4,096
      // blocks where 132 to 396 run at once.
      const ScopedEnv split_count("FT_CH11_SPLITS", "8");
      for (int d : {64, 128}) {
        const ft::Problem p = decode_problem(32, 32, 8, 4, 1000, d, false, ft::DType::BFloat16);
        SCOPED_TRACE(setting + ", splits '8', " + p.describe());
        ft::testing::expect_forward_correct(ch11::fastest(), p);
      }
    }
}

// merges_in_grid(splits, rows, blocks, resident blocks): where no block merges two rows, or as
// FT_CH11_GRID_MERGE forces it; never where the grid would not run at once.
TEST(Ch11, MergesInTheGridWhereNoBlockMergesTwoRowsAndItRunsAtOnce) {
  {
    const ScopedEnv unset("FT_CH11_GRID_MERGE", "");
    EXPECT_TRUE(ch11::merges_in_grid(66, 128, 132, 132));    // B = 1, 32 heads on one, four rows, 32k keys
    EXPECT_TRUE(ch11::merges_in_grid(128, 32, 128, 132));    // the same, one row
    EXPECT_FALSE(ch11::merges_in_grid(8, 128, 16, 132));     // B = 1, four rows, 1k keys: 8 rows a block
    EXPECT_FALSE(ch11::merges_in_grid(4, 2048, 128, 132));   // B = 16: 16 rows a block, one after another
    EXPECT_FALSE(ch11::merges_in_grid(66, 128, 133, 132));   // a block past those resident: never
    EXPECT_FALSE(ch11::merges_in_grid(1, 1, 132, 132));      // one split: nothing to merge
  }
  {
    const ScopedEnv never("FT_CH11_GRID_MERGE", "0");
    EXPECT_FALSE(ch11::merges_in_grid(66, 128, 132, 132));
  }
  const ScopedEnv forced("FT_CH11_GRID_MERGE", "1");
  EXPECT_TRUE(ch11::merges_in_grid(4, 2048, 128, 132));     // forced: rows one after another too
  EXPECT_FALSE(ch11::merges_in_grid(66, 128, 133, 132));    // but never past the resident blocks
  EXPECT_FALSE(ch11::merges_in_grid(1, 1, 132, 132));
}

// splits_with_keys(N_k, splits): choose_splits' count less the splits that the rounding of
// each to whole 128-key tiles leaves past the keys; all of them under FT_CH11_EMPTY_SPLITS=1.
TEST(Ch11, DropsTheSplitsLeftPastTheKeys) {
  {
    const ScopedEnv unset("FT_CH11_EMPTY_SPLITS", "");
    EXPECT_EQ(ch11::splits_with_keys(32768, 66), 64);   // 512 keys a split: 64 hold them all
    EXPECT_EQ(ch11::splits_with_keys(8192, 66), 64);    // 128 keys a split
    EXPECT_EQ(ch11::splits_with_keys(1000, 7), 4);      // 256 keys a split
    EXPECT_EQ(ch11::splits_with_keys(131072, 128), 128);
    EXPECT_EQ(ch11::splits_with_keys(100000, 66), 66);  // 1,536 keys a split: the last one short, not empty
    EXPECT_EQ(ch11::splits_with_keys(1, 8), 1);
  }
  const ScopedEnv kept("FT_CH11_EMPTY_SPLITS", "1");
  EXPECT_EQ(ch11::splits_with_keys(32768, 66), 66);
}

// grid_merge_slices(splits, rows, blocks, block threads, d): a row whole where its threads
// take every split in one batch of 16 a thread, else the fewest slices (2 or 4) that do, as
// long as no block gets two; or FT_CH11_GRID_MERGE_SLICES's, which must be 1, 2 or 4.
TEST(Ch11, GridMergeCutsRowsIntoSlicesWhereAWholeRowTakesTwoBatches) {
  {
    const ScopedEnv unset("FT_CH11_GRID_MERGE_SLICES", "");
    EXPECT_EQ(ch11::grid_merge_slices(128, 32, 128, 128, 128), 2);  // B = 1, 32 heads on one, one row, 32k keys
    EXPECT_EQ(ch11::grid_merge_slices(64, 32, 64, 128, 128), 1);    // the same at 8k keys: 64 splits, one batch
    EXPECT_EQ(ch11::grid_merge_slices(16, 32, 128, 128, 128), 1);   // 32 heads on 8: 16 splits
    EXPECT_EQ(ch11::grid_merge_slices(66, 128, 132, 128, 128), 1);  // four rows: no block for a second slice
    EXPECT_EQ(ch11::grid_merge_slices(128, 32, 63, 128, 128), 1);
    EXPECT_EQ(ch11::grid_merge_slices(128, 32, 128, 128, 64), 1);   // d = 64: 8 slots, 128 splits in one batch
    EXPECT_EQ(ch11::grid_merge_slices(128, 32, 128, 256, 128), 1);  // two warpgroups: 8 slots
    EXPECT_EQ(ch11::grid_merge_slices(128, 8, 128, 64, 128), 4);    // 2 slots a whole row: four slices
    EXPECT_EQ(ch11::grid_merge_slices(128, 8, 31, 64, 128), 2);     // the most that leave no block two
  }
  {
    const ScopedEnv whole("FT_CH11_GRID_MERGE_SLICES", "1");
    EXPECT_EQ(ch11::grid_merge_slices(128, 32, 128, 128, 128), 1);
  }
  const ScopedEnv wrong("FT_CH11_GRID_MERGE_SLICES", "3");
  EXPECT_THROW(ch11::grid_merge_slices(128, 32, 128, 128, 128), ft::Unsupported);
}

// The grid's merge with each row cut into 1, 2 and 4 slices of its columns (forced), and by
// its rule, against the float64 reference: 32 heads on one, one query row, 16,500 keys in 128
// splits (the last ragged), so that 32 rows meet 128 blocks and the rule cuts each row in two;
// bf16 and fp16, d = 64 and 128; and the paged cache, sequences of mixed lengths (96 rows: a
// block merges several slices in turn where forced).
TEST(Ch11, GridMergeInSlicesOfColumnsDecodesAsWholeRows) {
  REQUIRE_GPU();
  if (ft::device_sm() != 90) GTEST_SKIP() << "step 6's wgmma runs on Hopper (sm_90) alone";
  const ScopedEnv wgmma("FT_CH11_WGMMA", "1"), grid("FT_CH11_GRID_MERGE", "1"), splits("FT_CH11_SPLITS", "");
  for (const char* slices : {"1", "2", "4", ""}) {
    const ScopedEnv cut("FT_CH11_GRID_MERGE_SLICES", slices);
    for (int d : {64, 128})
      for (ft::DType t : {ft::DType::BFloat16, ft::DType::Float16}) {
        const ft::Problem p = decode_problem(1, 32, 1, 1, 16500, d, true, t);
        SCOPED_TRACE(std::string("FT_CH11_GRID_MERGE_SLICES='") + slices + "', " + p.describe());
        ft::testing::expect_forward_correct(ch11::fastest(), p);
      }
    SCOPED_TRACE(std::string("FT_CH11_GRID_MERGE_SLICES='") + slices + "', paged");
    expect_paged_correct(ft::DType::BFloat16, 128, 32, 1, 1, true, 16, {16500, 17, 1});
  }
}

// A paged block's first tile's table entries loaded beside its sequence's length (the
// default: first_entries_end) or after it (FT_CH11_LENGTH_FIRST=1), on step 5 and on step 6
// with one warpgroup: sequences shorter than the longest, whose first entries then include
// some past their own pages (the pool's last page: expect_paged_correct); one split walking
// every tile, seven of which three hold no key; pages of 1, 16 and 256 tokens.
TEST(Ch11, PagedBlocksLoadTheirFirstEntriesBesideTheLengthOrAfterIt) {
  REQUIRE_GPU();
  for (const char* first : {"", "1"})
    for (const char* wgmma : {"1", "0"}) {
      if (*wgmma == '1' && ft::device_sm() != 90) continue;  // step 6's wgmma runs on Hopper alone
      const ScopedEnv form("FT_CH11_LENGTH_FIRST", first), step("FT_CH11_WGMMA", wgmma),
          one("FT_CH11_WARPGROUPS", *wgmma == '1' ? "1" : "");
      for (const char* splits : {"", "1", "7"}) {
        const ScopedEnv split_count("FT_CH11_SPLITS", splits);
        for (int page_size : {1, 16, 256}) {
          SCOPED_TRACE(std::string("FT_CH11_LENGTH_FIRST='") + first + "', FT_CH11_WGMMA=" + wgmma + ", splits '" +
                       splits + "', pages of " + std::to_string(page_size));
          expect_paged_correct(ft::DType::BFloat16, 128, 32, 1, 4, true, page_size, {1000, 4, 17, 300});
          expect_paged_correct(ft::DType::Float16, 64, 32, 8, 1, false, page_size, {129, 1000, 1});
        }
      }
    }
}

TEST(Ch11, MergesInAClusterFewSplitsWhereTheGridRunsAtOnce) {
  const ScopedEnv unset("FT_CH11_CLUSTER", "");
  constexpr size_t k16 = 16 << 10, k32 = 32 << 10;  // a block's part: 32 rows (64 at d = 64), 64 rows
  // merges_in_cluster(splits, clusters, active clusters, part bytes)
  EXPECT_FALSE(ch11::merges_in_cluster(1, 1, 16, k16));   // one split: nothing to merge
  EXPECT_TRUE(ch11::merges_in_cluster(2, 1, 66, k16));
  EXPECT_TRUE(ch11::merges_in_cluster(8, 15, 15, k16));   // as many clusters as run at once
  EXPECT_FALSE(ch11::merges_in_cluster(8, 16, 15, k16));  // B = 16, 32 heads on one, 1,024 keys: a second wave
  EXPECT_FALSE(ch11::merges_in_cluster(8, 1, 15, k32));   // 32 heads on one, four rows: 64 rows at d = 128
  EXPECT_FALSE(ch11::merges_in_cluster(9, 1, 14, k16));   // past the portable cluster size
  EXPECT_FALSE(ch11::merges_in_cluster(4, 1, 0, k16));    // no cluster fits the GPU
  const ScopedEnv never("FT_CH11_CLUSTER", "0");
  EXPECT_FALSE(ch11::merges_in_cluster(8, 1, 15, k16));
  const ScopedEnv always("FT_CH11_CLUSTER", "1");
  EXPECT_TRUE(ch11::merges_in_cluster(8, 16, 15, k32));   // forced: clusters in waves, large parts
  EXPECT_FALSE(ch11::merges_in_cluster(9, 1, 14, k16));
  EXPECT_FALSE(ch11::merges_in_cluster(4, 1, 0, k16));
}

// The merge launched while the decode kernel runs (the default on sm_90: programmatic
// dependent launch) and launched plainly behind it (FT_CH11_PDL=0): either way it must read
// every split's finished result. Every variant that splits, with forced splits (the merge's
// lanes wrap at 33 and 128) and with the heuristic's, on both head dims, one and four query
// rows, and the paged cache of mixed lengths.
TEST(Ch11, MergeEarlyOrPlainReadsFinishedSplits) {
  REQUIRE_GPU();
  for (const char* pdl : {"", "0"}) {
    const ScopedEnv launch("FT_CH11_PDL", pdl);
    const bool early = *pdl == 0 && ft::device_sm() >= 90;
    ASSERT_EQ(ch11::merge_launches_early(), early) << "FT_CH11_PDL='" << pdl << "' on sm_" << ft::device_sm();
    for (const char* splits : {"", "33", "128"}) {
      const ScopedEnv forced("FT_CH11_SPLITS", splits);
      for (const auto& impl : ch11::forward_impls()) {
        if (impl.variant == "one_block") continue;  // one block the whole key range: no merge
        for (int d : {64, 128})
          for (int len_q : {1, 4}) {
            const ft::Problem p = decode_problem(1, 8, 2, len_q, 32805, d, true, ft::DType::BFloat16);
            SCOPED_TRACE(impl.variant + ", FT_CH11_PDL '" + pdl + "', splits '" + splits + "', " + p.describe());
            ft::testing::expect_forward_correct(impl, p);
          }
      }
    }
    SCOPED_TRACE(std::string("paged, FT_CH11_PDL '") + pdl + "'");
    expect_paged_correct(ft::DType::BFloat16, 128, 8, 1, 4, true, 16, {4, 17, 1000, 300});
  }
}

// A decode step recorded as a CUDA graph (the programs' --graph, PyTorch's torch.cuda.graphs)
// writes what the same step launched call by call writes, bit for bit: every variant, with
// 8 and 1 key/value heads (8 and more splits), merging through the workspace, after a grid
// barrier and, forced, in a cluster (8 splits), the merge launched early (sm_90) or plainly.
// O and lse are poisoned inside the recorded step, so the replay itself must write every
// element.
TEST(Ch11, GraphReplayWritesWhatTheCallWrites) {
  REQUIRE_GPU();
  for (const char* pdl : {"", "0"})
    for (const char* cluster : {"", "1"}) {
      const ScopedEnv launch("FT_CH11_PDL", pdl), merge("FT_CH11_CLUSTER", cluster);
      for (const auto& impl : ch11::forward_impls())
        for (int len_q : {1, 4})
          for (int heads_kv : {8, 1}) {
            const ft::Problem p = decode_problem(2, 32, heads_kv, len_q, 5000, 128, true, ft::DType::BFloat16);
            SCOPED_TRACE(impl.variant + ", FT_CH11_PDL '" + pdl + "', FT_CH11_CLUSTER '" + cluster + "', " +
                         p.describe());
            ft::DeviceTensor Q(p.dtype, size_t(p.elems())), K(p.dtype, size_t(p.kv_elems())),
                V(p.dtype, size_t(p.kv_elems())), O(p.dtype, size_t(p.elems()));
            ft::DeviceBuffer<float> lse(size_t(p.rows()));
            ft::DeviceBuffer<unsigned char> ws(std::max<size_t>(1, impl.workspace_bytes(p)));
            ft::fill_uniform(Q, 1, -1.f, 1.f);
            ft::fill_uniform(K, 2, -1.f, 1.f);
            ft::fill_uniform(V, 3, -1.f, 1.f);
            const ft::ForwardArgs a{Q.get(), K.get(), V.get(), O.get(), lse.get(), ws.get()};
            const auto step = [&](cudaStream_t s) {
              O.poison(s);
              lse.poison(s);
              impl.run(p, a, s);
            };
            try {
              step(0);
            } catch (const ft::DeviceTooSmall& e) {  // step 6 (wgmma) on a GPU other than Hopper
              std::printf("[ SKIPPED  ] %s: %s\n", impl.variant.c_str(), e.what());
              continue;
            }
            CUDA_CHECK(cudaDeviceSynchronize());
            const std::vector<float> o_call = O.download(), lse_call = lse.download();
            const auto poisoned = [](const std::vector<float>& x) {
              return std::any_of(x.begin(), x.end(), [](float v) { return std::isnan(v); });
            };
            ASSERT_FALSE(poisoned(o_call) || poisoned(lse_call)) << "the call left poisoned elements";
            const ft::Timing t = ft::time_on_gpu(step, 1, 3, false, 0, true);  // warm-up, record, replays
            ASSERT_TRUE(t.graph);
            const std::vector<float> o_graph = O.download(), lse_graph = lse.download();
            ASSERT_EQ(o_graph.size(), o_call.size());
            EXPECT_EQ(std::memcmp(o_graph.data(), o_call.data(), o_call.size() * sizeof(float)), 0) << "O differs";
            EXPECT_EQ(std::memcmp(lse_graph.data(), lse_call.data(), lse_call.size() * sizeof(float)), 0)
                << "lse differs";
          }
    }
}

TEST(Ch11Paged, RefusesTablesItCannotReadSafely) {
  const ft::Problem p = decode_problem(2, 8, 2, 1, 40, 64, true, ft::DType::BFloat16);
  const ft::PagedKvShape pool{10, 16, 2, 64};
  const std::vector<int32_t> tables{0, 1, 2, 3, 4, 5}, lens{40, 33};  // 3 pages a sequence
  EXPECT_NO_THROW(ch11::check_paged(p, pool, tables, 3, lens));
  auto refused = [&](const ft::Problem& q, const ft::PagedKvShape& s, std::vector<int32_t> t, int pps,
                     std::vector<int32_t> l, const std::string& says) {
    try {
      ch11::check_paged(q, s, t, pps, l);
      ADD_FAILURE() << "accepted; expected a refusal saying \"" << says << "\"";
    } catch (const ft::Unsupported& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused(p, pool, {0, 1, 10, 3, 4, 5}, 3, lens, "names page 10, outside the pool's 10 pages");
  refused(p, pool, {0, 1, 2, 3, -1, 5}, 3, lens, "names page -1");
  refused(p, pool, tables, 3, {49, 33}, "longer than its 3 pages of 16 hold");
  refused(p, pool, tables, 3, {40, 0}, "fewer than its 1 query rows");
  refused(p, pool, {0, 1, 2}, 3, lens, "need 2 lengths and 6 block-table entries");
  refused(p, {10, 16, 4, 64}, tables, 3, lens, "the pool holds 4 key/value heads");
  refused(p, {10, 24, 2, 64}, tables, 3, lens, "pages of 24 tokens; the kernel takes a power of two");
  refused(p, {1 << 20, 1024, 2, 64}, tables, 3, lens, "the pool holds 2147483648 rows");
  refused(decode_problem(2, 8, 3, 1, 40, 64, true, ft::DType::BFloat16), {10, 16, 3, 64}, tables, 3, lens,
          "not a multiple of 3 key/value heads");
  refused(decode_problem(2, 8, 2, 1, 33, 64, true, ft::DType::BFloat16), pool, tables, 3, lens,
          "must be the longest sequence");
  refused(decode_problem(2, 8, 2, 1, 40, 96, true, ft::DType::BFloat16), {10, 16, 2, 96}, tables, 3, lens,
          "bf16 or fp16 at d = 64 or 128");
  // A page past the sequence's own pages is never read (its entry may be loaded, never used):
  // its entry is not checked.
  EXPECT_NO_THROW(ch11::check_paged(p, pool, {0, 1, 2, 3, 4, 99}, 3, {40, 32}));
  // The launch refuses tables whose rows cannot hold len_kv, before it touches the GPU.
  ch11::PagedDecodeArgs a;
  a.pool = pool, a.pages_per_seq = 2;
  try {
    ch11::decode_paged(p, a, 0);
    ADD_FAILURE() << "accepted 2 entries of 16 tokens a sequence for len_kv = 40";
  } catch (const ft::Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("hold fewer than len_kv (40)"), std::string::npos) << e.what();
  }
  // And pools whose rows a 32-bit index cannot count (paged_offset), whatever their tables.
  a.pool = {1 << 20, 1024, 2, 64}, a.pages_per_seq = 3;
  try {
    ch11::decode_paged(p, a, 0);
    ADD_FAILURE() << "accepted a pool of 2^31 rows";
  } catch (const ft::Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("counts rows in 32 bits"), std::string::npos) << e.what();
  }
}

}  // namespace
