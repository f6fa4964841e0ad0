// GPU tests of chapter 06: every variant, in bf16 and fp16, on ragged sizes (N = 1, 17, 64,
// 1000, 2048; warp_rows also 4096 in bf16, where it falls back to row_softmax_tc), d = 64 and
// 128, causal and not, B·H = 6, against the float64 reference of the rounded inputs under
// the same-precision rule (common/harness/testing.hpp), with every output poisoned first; large
// scores; many heads and a custom scale; what storing S in the dtype costs; the warp-per-row
// softmax against row_softmax_tc on the same grid, kernel to kernel; and the refusals
// (float32, other head dims), which need no GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "06_tensor_cores/row_softmax.cuh"
#include "06_tensor_cores/tensor_cores.hpp"
#include "06_tensor_cores/warp_softmax.cuh"
#include "device/buffer.cuh"
#include "core/check.cuh"
#include "reference/inputs.hpp"
#include "device/launch.cuh"
#include "reference/reference.hpp"
#include "harness/testing.hpp"

namespace {

using ft::testing::Shape;

using Case = ft::testing::ForwardCase;
constexpr auto case_name = &ft::testing::case_name<ft::ForwardImpl>;

std::vector<Case> standard_cases() {
  std::vector<Case> cases;
  for (const auto& impl : ch06::forward_impls())
    for (ft::DType t : impl.dtypes)
      for (const auto& shape : ft::testing::standard_shapes(impl.head_dims))
        cases.push_back({impl, shape, t});
  // warp_rows past the warp's 2048 columns: row_softmax_tc again, behind the same dispatch.
  // bf16 only (fp16 takes the same branch); chapter 07's tests use these shapes too, so the
  // float64 reference usually comes from the cache.
  for (int d : ch06::warp_rows().head_dims)
    for (bool causal : {false, true})
      cases.push_back({ch06::warp_rows(), Shape{4096, d, causal}, ft::DType::BFloat16});
  return cases;
}

class Ch06Standard : public ::testing::TestWithParam<Case> {};

TEST_P(Ch06Standard, MatchesReference) {
  FT_REQUIRE_GPU();
  ft::testing::expect_forward_correct(GetParam().impl, GetParam().problem());
}

INSTANTIATE_TEST_SUITE_P(AllVariants, Ch06Standard, ::testing::ValuesIn(standard_cases()),
                         case_name);

// Raw scores near ±1e4 (scaled: about ±1250): exp of them overflows unless the row max is
// subtracted first. grid_f32 keeps those scores to 24 bits and must meet the rule; grid_half
// rounds them to 8 (bf16) or 11 (fp16) bits first, which the next test measures instead.
std::vector<Case> large_score_cases() {
  std::vector<Case> cases;
  for (ft::DType t : ch06::grid_f32().dtypes)
    for (int n : {17, 1000})
      for (int d : {64, 128})
        for (bool causal : {false, true}) cases.push_back({ch06::grid_f32(), Shape{n, d, causal}, t});
  return cases;
}

class Ch06LargeScores : public ::testing::TestWithParam<Case> {};

TEST_P(Ch06LargeScores, NoOverflow) {
  FT_REQUIRE_GPU();
  ft::testing::expect_forward_correct(GetParam().impl, GetParam().problem(),
                                      ft::InputKind::LargeScores);
}

INSTANTIATE_TEST_SUITE_P(GridF32, Ch06LargeScores, ::testing::ValuesIn(large_score_cases()),
                         case_name);

/// Relative L2 error of `got` against the float64 `ref`; NaN if anything is not finite.
double rel_l2(const std::vector<float>& got, const std::vector<double>& ref) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return NAN;
    err += (got[i] - ref[i]) * (got[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  return std::sqrt(err / norm);
}

// What S in the dtype costs, measured where it shows most: scores of about ±1250, where one
// bf16 step is 8 (fp16: 1) and lands in the exponent. The log-sum-exp, which is about the
// row's largest score, carries that rounding directly: grid_half's lse must be finite and
// clearly worse than grid_f32's (float32 S: steps of about 1e-4 at these magnitudes).
TEST(Ch06, StoringScoresInTheDtypeCostsDigits) {
  FT_REQUIRE_GPU();
  for (ft::DType t : {ft::DType::BFloat16, ft::DType::Float16}) {
    for (bool causal : {false, true}) {
      const ft::Problem p = ft::make_problem(1, 2, 1000, 64, causal, t);
      SCOPED_TRACE(p.describe());
      const ft::AttentionInputs in = ft::make_inputs(p, ft::InputKind::LargeScores, 7);
      std::vector<double> O(size_t(p.elems())), lse(size_t(p.rows()));
      ft::reference_forward(p, in.Q.data(), in.K.data(), in.V.data(), O.data(), lse.data());
      const auto f32 = ft::testing::run_forward(ch06::grid_f32(), p, in);
      const auto half = ft::testing::run_forward(ch06::grid_half(), p, in);
      const double e32 = rel_l2(f32.lse, lse), e16 = rel_l2(half.lse, lse);
      std::printf("  %s: lse relative L2 error, S float32 %.2e, S %s %.2e; O %.2e vs %.2e\n",
                  p.describe().c_str(), e32, ft::dtype_name(t), e16, rel_l2(f32.O, O),
                  rel_l2(half.O, O));
      EXPECT_TRUE(std::isfinite(e16)) << "grid_half overflowed";
      EXPECT_GT(e16, 10 * e32) << "the rounding of S should show in the lse";
    }
  }
}

// warp_rows on large scores: its S is grid_half's (the same qk_scores_tc, bit for bit), and
// the rule's large-score tests hold only float32 S (Ch06LargeScores: S in the dtype puts its
// rounding in the exponent). So it must give what grid_half gives, up to the float32 order of
// the softmax's sums: the lse to 1e-6 relative, O to within one rounding of every element
// (error_floor of the dtype), and nothing non-finite.
TEST(Ch06, WarpRowsMatchesGridHalfOnLargeScores) {
  FT_REQUIRE_GPU();
  for (ft::DType t : {ft::DType::BFloat16, ft::DType::Float16})
    for (int n : {17, 1000})
      for (int d : {64, 128})
        for (bool causal : {false, true}) {
          const ft::Problem p = Shape{n, d, causal, t}.problem();
          SCOPED_TRACE(p.describe());
          const ft::AttentionInputs in = ft::make_inputs(p, ft::InputKind::LargeScores, 11);
          const auto half = ft::testing::run_forward(ch06::grid_half(), p, in);
          const auto warp = ft::testing::run_forward(ch06::warp_rows(), p, in);
          const std::vector<double> lse(half.lse.begin(), half.lse.end());
          const std::vector<double> O(half.O.begin(), half.O.end());
          const double e_lse = rel_l2(warp.lse, lse), e_o = rel_l2(warp.O, O);
          EXPECT_TRUE(std::isfinite(e_lse) && std::isfinite(e_o)) << "warp_rows: not finite";
          EXPECT_LE(e_lse, 1e-6);
          EXPECT_LE(e_o, ft::testing::error_floor(t));
        }
}

// B·H = 70 000 heads (past grid.y's 65 535: every kernel flattens heads into grid.x), and a
// scale other than 1/sqrt(d).
TEST(Ch06, ManyHeadsAndCustomScale) {
  FT_REQUIRE_GPU();
  ft::Problem p = ft::make_problem(700, 100, 5, 64, true, ft::DType::BFloat16);
  for (const auto& impl : ch06::forward_impls()) {
    SCOPED_TRACE(impl.variant);
    ft::testing::expect_forward_correct(impl, p);
  }
  p = ft::make_problem(1, 2, 300, 128, false, ft::DType::Float16);
  p.scale = 0.05f;
  for (const auto& impl : ch06::forward_impls()) {
    SCOPED_TRACE(impl.variant);
    ft::testing::expect_forward_correct(impl, p);
  }
}

// warp_softmax_tc against row_softmax_tc, kernel to kernel, on the same grid of scores:
// every storage (float32, the dtype) and element type, every warp instance (N = 1, 17, 200,
// 256: 8 scores a lane; 257: 16; 1000, 1024: 32; 2048: 64), causal and not, ordinary and
// large scores (about ±1250, where a lost max-subtraction overflows). B·H = 3 heads, so the
// last block of 8 rows is partial for every odd N. Every column a kernel must not read (at
// or past the visible end, the padding) holds NaN, which would poison P and the lse if read.
// Both kernels must write P at the same places (exact zeros at the same places, every byte
// past p_columns_written untouched), within one rounding of the dtype of each other and of
// the float64 softmax of the stored scores, and the same lse to float32 rounding.
template <class Score, class T>
void expect_warp_softmax_matches_block_softmax() {
  constexpr bool f32 = std::is_same_v<Score, float>;
  constexpr ft::DType kT = std::is_same_v<T, __half> ? ft::DType::Float16 : ft::DType::BFloat16;
  const double u = ft::unit_roundoff(kT);
  try {
    ft::require_sm(80, "chapter 06's softmax kernels");
  } catch (const ft::DeviceTooSmall& e) {
    GTEST_SKIP() << e.what();
  }
  const int heads = 3;
  std::mt19937 gen(2024);
  for (int N : {1, 17, 200, 256, 257, 1000, 1024, 2048})
    for (bool causal : {false, true})
      for (float spread : {3.f, 1250.f}) {
        SCOPED_TRACE("N = " + std::to_string(N) + (causal ? " causal" : "") +
                     ", scores within ±" + std::to_string(spread) + (f32 ? ", float32 S" : ", S in the dtype"));
        const int ld = ch06::grid_row_stride(N);
        ASSERT_TRUE(ch06::warp_softmax_fits(ld));
        ASSERT_EQ(ch06::softmax_regs(ld), 16);  // the one row_softmax_tc instance below
        const int64_t rows = int64_t(heads) * N;
        const size_t row_bytes = size_t(ld) * sizeof(Score);
        std::vector<unsigned char> grid(size_t(rows) * row_bytes);
        std::vector<float> scores(grid.size() / sizeof(Score));  // as stored, NaN where unread
        std::uniform_real_distribution<float> draw(-spread, spread);
        for (int64_t r = 0; r < rows; ++r) {
          const int visible = causal ? int(r % N) + 1 : N;
          for (int c = 0; c < ld; ++c) {
            unsigned char* at = grid.data() + size_t(r) * row_bytes + size_t(c) * sizeof(Score);
            const float v = c < visible ? ft::round_to(f32 ? ft::DType::Float32 : kT, draw(gen)) : NAN;
            scores[size_t(r) * size_t(ld) + size_t(c)] = v;
            if constexpr (f32) {
              std::memcpy(at, &v, 4);
            } else {
              const uint16_t bits = c < visible ? ft::to_bits(kT, v) : uint16_t(kT == ft::DType::Float16 ? 0x7E00 : 0x7FC0);
              std::memcpy(at, &bits, 2);
            }
          }
        }
        ft::DeviceBuffer<unsigned char> block_grid(grid.size()), warp_grid(grid.size());
        ft::DeviceBuffer<float> block_lse{size_t(rows)}, warp_lse{size_t(rows)};
        block_grid.upload(grid);
        warp_grid.upload(grid);
        block_lse.poison();
        warp_lse.poison();
        const int p_ld = ld * int(sizeof(Score) / sizeof(T));
        auto params = [&](ft::DeviceBuffer<unsigned char>& g, ft::DeviceBuffer<float>& lse) {
          return ch06::SoftmaxParams<Score, T>{reinterpret_cast<const Score*>(g.get()),
                                               reinterpret_cast<T*>(g.get()), lse.get(), N, ld, p_ld, causal};
        };
        ch06::row_softmax_tc<Score, T, 16><<<unsigned(rows), ch06::kSoftmaxThreads>>>(params(block_grid, block_lse));
        CUDA_CHECK_LAUNCH();
        ch06::launch_warp_softmax(params(warp_grid, warp_lse), rows, unsigned(ch06::warp_softmax_blocks(rows)), 0);
        CUDA_CHECK(cudaDeviceSynchronize());
        const auto by_block = block_grid.download(), by_warp = warp_grid.download();
        const auto lse_block = block_lse.download(), lse_warp = warp_lse.download();

        int bad = 0;  // differences found; the first few are reported, not millions
        auto fail = [&](const std::string& what) {
          if (++bad <= 10) ADD_FAILURE() << what;
        };
        for (int64_t r = 0; r < rows; ++r) {
          const int i = int(r % N), written = ch06::p_columns_written(N, causal, i);
          const float* row = scores.data() + size_t(r) * size_t(ld);
          const int visible = causal ? i + 1 : N;
          double m = -INFINITY, l = 0;
          for (int c = 0; c < visible; ++c) m = std::max(m, double(row[c]));
          for (int c = 0; c < visible; ++c) l += std::exp(row[c] - m);
          const double lse = m + std::log(l), lse_tol = 1e-6 * std::fabs(lse) + 1e-5;
          const double lw = lse_warp[size_t(r)], lb = lse_block[size_t(r)];
          if (!(std::fabs(lw - lb) <= lse_tol && std::fabs(lw - lse) <= lse_tol))
            fail("row " + std::to_string(r) + ": lse warp " + std::to_string(lw) + ", block " +
                 std::to_string(lb) + ", float64 " + std::to_string(lse));
          const size_t at = size_t(r) * row_bytes;
          for (int c = 0; c < written; ++c) {
            uint16_t wb, bb;
            std::memcpy(&wb, by_warp.data() + at + size_t(c) * 2, 2);
            std::memcpy(&bb, by_block.data() + at + size_t(c) * 2, 2);
            // Masked keys and padding: exact (+0) zeros from both. Visible keys: within one
            // rounding of each other and of the float64 weight (plus fp16's smallest
            // subnormal, 2^-24, where the weights leave the normal range).
            const double pw = ft::from_bits(kT, wb), pb = ft::from_bits(kT, bb);
            const double want = c < visible ? std::exp(row[c] - lse) : 0.0;
            const bool ok = c < visible ? std::fabs(pw - pb) <= 2 * u * pb + 0x1p-24 &&
                                              std::fabs(pw - want) <= 2 * u * want + 0x1p-24
                                        : wb == 0 && bb == 0;
            if (!ok)
              fail("row " + std::to_string(r) + " column " + std::to_string(c) + ": P warp " +
                   std::to_string(pw) + ", block " + std::to_string(pb) + ", float64 " + std::to_string(want));
          }
          // Past P's written columns, both leave the bytes as they were (the rest of S's row,
          // or the key tiles past the ones P·V reads).
          const size_t p_end = size_t(written) * 2;
          const auto untouched = [&](const std::vector<unsigned char>& out) {
            return std::memcmp(out.data() + at + p_end, grid.data() + at + p_end, row_bytes - p_end) == 0;
          };
          if (!untouched(by_warp)) fail("row " + std::to_string(r) + ": warp_softmax_tc wrote past column " + std::to_string(written));
          if (!untouched(by_block)) fail("row " + std::to_string(r) + ": row_softmax_tc wrote past column " + std::to_string(written));
        }
        EXPECT_EQ(bad, 0);
      }
}

TEST(Ch06WarpSoftmax, WritesWhatRowSoftmaxWritesBf16Scores) {
  FT_REQUIRE_GPU();
  expect_warp_softmax_matches_block_softmax<__nv_bfloat16, __nv_bfloat16>();
}
TEST(Ch06WarpSoftmax, WritesWhatRowSoftmaxWritesFp16Scores) {
  FT_REQUIRE_GPU();
  expect_warp_softmax_matches_block_softmax<__half, __half>();
}
TEST(Ch06WarpSoftmax, WritesWhatRowSoftmaxWritesFloat32ScoresBf16P) {
  FT_REQUIRE_GPU();
  expect_warp_softmax_matches_block_softmax<float, __nv_bfloat16>();
}
TEST(Ch06WarpSoftmax, WritesWhatRowSoftmaxWritesFloat32ScoresFp16P) {
  FT_REQUIRE_GPU();
  expect_warp_softmax_matches_block_softmax<float, __half>();
}

// float32 and other head dims are refused before any launch (no GPU needed).
TEST(Ch06, RefusesFloat32AndOtherHeadDims) {
  for (const auto& impl : ch06::forward_impls()) {
    EXPECT_EQ(impl.head_dims, (std::vector<int>{64, 128})) << impl.variant;
    EXPECT_EQ(impl.min_sm, 80) << impl.variant;
    ft::Problem p = ft::make_problem(1, 1, 16, 64, false, ft::DType::Float32);
    EXPECT_THROW(ft::check_supported(impl, p), ft::Unsupported) << impl.variant;
    EXPECT_THROW(impl.run(p, ft::ForwardArgs{}, nullptr), ft::Unsupported) << impl.variant;
    p.dtype = ft::DType::BFloat16;
    p.head_dim = 32;
    EXPECT_THROW(ft::check_supported(impl, p), ft::Unsupported) << impl.variant;
  }
}

}  // namespace
