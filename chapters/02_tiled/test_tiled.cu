// GPU tests of chapter 02: both matrix products on their own, tiled_matmul and the
// smem_tiles variant's smem_tiles_matmul (all four transpose combinations, ragged sizes,
// batches past the grid limit, strided batches), and every variant's forward against the
// float64 reference.
#include <gtest/gtest.h>

#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "02_tiled/tiled.hpp"
#include "02_tiled/tiled_matmul.cuh"
#include "device/buffer.cuh"
#include "reference/inputs.hpp"
#include "harness/testing.hpp"
#include "harness/verify.hpp"

namespace {

using ft::testing::Shape;

// ---- tiled_matmul and smem_tiles_matmul against a float64 CPU product ----------------------

/// ch02::tiled_matmul or ch02::smem_tiles_matmul (the same arguments).
using MatmulFn = void (*)(bool, bool, int, int, int, float, const float*, int64_t,
                          const float*, int64_t, float*, int64_t, int64_t, cudaStream_t);

struct MatmulCase {
  int M, N, K;
  int64_t batch;
  bool trans_a, trans_b;
};

std::string case_name(const MatmulCase& c) {
  return std::string(c.trans_a ? "T" : "N") + (c.trans_b ? "T" : "N") + "_" +
         std::to_string(c.M) + "x" + std::to_string(c.N) + "x" + std::to_string(c.K) + "_b" +
         std::to_string(c.batch);
}

/// Runs `matmul` on random operands with C poisoned, matrices `gap` elements apart beyond
/// their own size, and compares with a float64 product. The gaps between the matrices of C
/// must keep their poison (nothing written outside C[b]).
void expect_matmul_correct(MatmulFn matmul, const MatmulCase& c, float alpha, int64_t gap = 0) {
  SCOPED_TRACE(case_name(c) + " alpha=" + std::to_string(alpha) + " gap=" + std::to_string(gap));
  const int64_t sa = int64_t(c.M) * c.K + gap, sb = int64_t(c.K) * c.N + gap,
                sc = int64_t(c.M) * c.N + gap;
  const std::vector<float> A = ft::random_uniform(size_t(sa * c.batch), 11);
  const std::vector<float> B = ft::random_uniform(size_t(sb * c.batch), 12);
  ft::DeviceBuffer<float> dA(A.size()), dB(B.size()), dC(size_t(sc * c.batch));
  dA.upload(A);
  dB.upload(B);
  dC.poison();
  matmul(c.trans_a, c.trans_b, c.M, c.N, c.K, alpha, dA.get(), sa, dB.get(), sb, dC.get(), sc,
         c.batch, 0);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> C = dC.download();

  // op(A)[m][k] and op(B)[k][n] as the interface defines them.
  auto a = [&](int64_t b, int m, int k) {
    return double(c.trans_a ? A[b * sa + int64_t(k) * c.M + m] : A[b * sa + int64_t(m) * c.K + k]);
  };
  auto bm = [&](int64_t b, int k, int n) {
    return double(c.trans_b ? B[b * sb + int64_t(n) * c.K + k] : B[b * sb + int64_t(k) * c.N + n]);
  };
  std::vector<double> ref;
  std::vector<float> got;
  for (int64_t b = 0; b < c.batch; ++b)
    for (int m = 0; m < c.M; ++m)
      for (int n = 0; n < c.N; ++n) {
        double sum = 0;
        for (int k = 0; k < c.K; ++k) sum += a(b, m, k) * bm(b, k, n);
        ref.push_back(alpha * sum);
        got.push_back(C[b * sc + int64_t(m) * c.N + n]);
      }
  // float32 products of up to 1000 terms in [-1, 1): rounding error far below 1e-5.
  const ft::VerifyResult v = ft::verify("C", got.data(), ref.data(), got.size(), 1e-5);
  EXPECT_TRUE(v.ok) << v.message;

  uint32_t poison;
  std::memset(&poison, 0xFF, sizeof poison);
  int64_t touched = 0;
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t g = sc - gap; g < sc; ++g) {
      uint32_t bits;
      std::memcpy(&bits, &C[b * sc + g], sizeof bits);
      touched += bits != poison;
    }
  EXPECT_EQ(touched, 0) << "elements between the matrices of C were written";
}

// Prints the case by name in test listings (instead of its bytes).
void PrintTo(const MatmulCase& c, std::ostream* os) { *os << case_name(c); }

class TiledMatmul : public ::testing::TestWithParam<MatmulCase> {};

TEST_P(TiledMatmul, MatchesFloat64) {
  FT_REQUIRE_GPU();
  expect_matmul_correct(ch02::tiled_matmul, GetParam(), 0.75f);
}

// The same cases for the smem_tiles variant's kernel (16×16 tiles: the sizes cross several
// of its tiles and steps along K where they cross one of tiled_matmul's).
class SmemTilesMatmul : public ::testing::TestWithParam<MatmulCase> {};

TEST_P(SmemTilesMatmul, MatchesFloat64) {
  FT_REQUIRE_GPU();
  expect_matmul_correct(ch02::smem_tiles_matmul, GetParam(), 0.75f);
}

std::vector<MatmulCase> matmul_cases() {
  struct Size {
    int M, N, K;
    int64_t batch;
  };
  const Size sizes[] = {
      {37, 70, 19, 3},   // ragged in every dimension, batched
      {1, 1, 1, 1},      // a single element
      {64, 64, 16, 2},   // exactly one tile and one slab
      {130, 65, 100, 2}, // several tiles and slabs, all ragged; N odd (element-wise stores)
      {16, 128, 1000, 1},// deep K: many slabs accumulate
      {33, 20, 0, 2},    // K = 0: C = 0
  };
  std::vector<MatmulCase> cases;
  for (const Size& s : sizes)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) cases.push_back({s.M, s.N, s.K, s.batch, ta, tb});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, TiledMatmul, ::testing::ValuesIn(matmul_cases()),
                         [](const auto& info) { return case_name(info.param); });
INSTANTIATE_TEST_SUITE_P(Cases, SmemTilesMatmul, ::testing::ValuesIn(matmul_cases()),
                         [](const auto& info) { return case_name(info.param); });

/// Matrices of a batch further apart than their size: the strides, not the sizes, place them.
void expect_gaps_untouched(MatmulFn matmul) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      expect_matmul_correct(matmul, {37, 70, 19, 3, ta, tb}, 1.f, 5);   // odd gap: element-wise stores
      expect_matmul_correct(matmul, {40, 64, 20, 3, ta, tb}, 1.f, 12);  // aligned gap: float4 stores
    }
}

TEST(TiledMatmulStrides, GapsBetweenMatricesStayUntouched) {
  FT_REQUIRE_GPU();
  expect_gaps_untouched(ch02::tiled_matmul);
}

TEST(SmemTilesMatmulStrides, GapsBetweenMatricesStayUntouched) {
  FT_REQUIRE_GPU();
  expect_gaps_untouched(ch02::smem_tiles_matmul);  // (its stores are element-wise in both)
}

// More matrices than the 65535 blocks grid.z allows: the kernel loops over the batch.
TEST(TiledMatmulStrides, BatchBeyondGridLimit) {
  FT_REQUIRE_GPU();
  expect_matmul_correct(ch02::tiled_matmul, {3, 5, 2, 70000, false, true}, 2.f);
}

TEST(SmemTilesMatmulStrides, BatchBeyondGridLimit) {
  FT_REQUIRE_GPU();
  expect_matmul_correct(ch02::smem_tiles_matmul, {3, 5, 2, 70000, false, true}, 2.f);
}

// ---- the forward pass, every variant --------------------------------------------------------

struct Case {
  ft::ForwardImpl impl;
  Shape shape;
};

std::string forward_case_name(const ::testing::TestParamInfo<Case>& info) {
  return info.param.impl.variant + "_" + ft::testing::shape_name(info.param.shape);
}

/// Every variant × `shapes`.
std::vector<Case> cases_of(const std::vector<Shape>& shapes) {
  std::vector<Case> cases;
  for (const auto& impl : ch02::forward_impls())
    for (const Shape& shape : shapes) cases.push_back({impl, shape});
  return cases;
}

class Ch02Forward : public ::testing::TestWithParam<Case> {};

TEST_P(Ch02Forward, MatchesReference) {
  FT_REQUIRE_GPU();
  ft::testing::expect_forward_correct(GetParam().impl, GetParam().shape.problem());
}

INSTANTIATE_TEST_SUITE_P(StandardShapes, Ch02Forward,
                         ::testing::ValuesIn(cases_of(ft::testing::standard_shapes())),
                         forward_case_name);

// Scores near ±1e4: exp overflows float32 unless the row maximum is subtracted first.
// O and lse are also held to 2x the float32 unfused computation's error on the same inputs
// (testing.hpp), under the kLargeScoreTolerance cap.
class Ch02LargeScores : public ::testing::TestWithParam<Case> {};

TEST_P(Ch02LargeScores, StaysFiniteAndAccurate) {
  FT_REQUIRE_GPU();
  ft::testing::expect_forward_correct(GetParam().impl, GetParam().shape.problem(),
                                      ft::InputKind::LargeScores,
                                      ft::testing::kLargeScoreTolerance);
}

INSTANTIATE_TEST_SUITE_P(Shapes, Ch02LargeScores,
                         ::testing::ValuesIn(cases_of({Shape{17, 64, false}, Shape{17, 64, true},
                                                       Shape{1000, 64, false},
                                                       Shape{1000, 64, true}})),
                         forward_case_name);

// Head dimensions that are not a multiple of 4 or of the tile (element-wise stores in P·V).
TEST(Ch02Forward, UnusualHeadDims) {
  FT_REQUIRE_GPU();
  for (const auto& impl : ch02::forward_impls())
    for (int d : {1, 7, 100}) {
      SCOPED_TRACE(impl.variant + " d=" + std::to_string(d));
      ft::testing::expect_forward_correct(impl, Shape{33, d, true}.problem());
    }
}

}  // namespace
