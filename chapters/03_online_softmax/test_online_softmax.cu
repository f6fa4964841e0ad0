// GPU tests of chapter 03: the attention softmax on its own (P and lse, masks), the forward
// pass against the float64 reference, and the row softmax (both variants, every code path:
// rows in registers of both sizes, the two-read fallback for long, odd or unaligned rows).
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "03_online_softmax/online_softmax.hpp"
#include "device/buffer.cuh"
#include "api/flashtut.h"
#include "reference/inputs.hpp"
#include "harness/testing.hpp"
#include "harness/verify.hpp"

namespace {

using ft::testing::Shape;

/// Float64 softmax of one row over its first `visible` entries; zeros after. Also lse.
std::vector<double> softmax_ref(const float* x, int cols, int visible, double* lse = nullptr) {
  double m = -INFINITY, l = 0;
  for (int j = 0; j < visible; ++j) m = std::max(m, double(x[j]));
  for (int j = 0; j < visible; ++j) l += std::exp(double(x[j]) - m);
  std::vector<double> p(cols, 0.0);
  for (int j = 0; j < visible; ++j) p[j] = std::exp(double(x[j]) - m) / l;
  if (lse) *lse = m + std::log(l);
  return p;
}

// ---- attention_softmax: what chapter 05 calls directly -----------------------------------

class AttentionSoftmax : public ::testing::TestWithParam<Shape> {};

TEST_P(AttentionSoftmax, MatchesFloat64InPlace) {
  FT_REQUIRE_GPU();
  const ft::Problem p = GetParam().problem();
  const int N = p.len_q;
  // Scaled scores of a few units, as scale·Q·Kᵀ produces them.
  const std::vector<float> S = ft::random_uniform(size_t(p.grid_elems()), 31, -3.f, 3.f);
  ft::DeviceBuffer<float> dS(S.size()), dlse(size_t(p.rows()));
  dS.upload(S);
  dlse.poison();
  ch03::attention_softmax(p, dS.get(), dlse.get(), 0);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> P = dS.download(), lse = dlse.download();

  std::vector<double> refP, ref_lse(size_t(p.rows()));
  int64_t masked_nonzero = 0;
  for (int64_t row = 0; row < p.rows(); ++row) {
    const int i = int(row % N), visible = p.causal ? i + 1 : N;
    const auto r = softmax_ref(&S[row * N], N, visible, &ref_lse[row]);
    refP.insert(refP.end(), r.begin(), r.end());
    for (int j = visible; j < N; ++j) masked_nonzero += P[row * N + j] != 0.f;
  }
  const ft::VerifyResult vp = ft::verify("P", P.data(), refP.data(), P.size(), 1e-5);
  const ft::VerifyResult vl = ft::verify("lse", lse.data(), ref_lse.data(), lse.size(), 1e-5);
  EXPECT_TRUE(vp.ok) << vp.message;
  EXPECT_TRUE(vl.ok) << vl.message;
  EXPECT_EQ(masked_nonzero, 0) << "masked entries of P must be exactly 0";
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionSoftmax,
                         ::testing::Values(Shape{1, 64, false}, Shape{1, 64, true},
                                           Shape{17, 64, false}, Shape{17, 64, true},
                                           Shape{1000, 64, false}, Shape{1000, 64, true}),
                         [](const auto& info) { return ft::testing::shape_name(info.param); });

// ---- the forward pass ---------------------------------------------------------------------

class Ch03Forward : public ::testing::TestWithParam<Shape> {};

TEST_P(Ch03Forward, MatchesReference) {
  FT_REQUIRE_GPU();
  ft::testing::expect_forward_correct(ch03::online(), GetParam().problem());
}

INSTANTIATE_TEST_SUITE_P(StandardShapes, Ch03Forward,
                         ::testing::ValuesIn(ft::testing::standard_shapes()),
                         [](const auto& info) { return ft::testing::shape_name(info.param); });

// Scores near ±1e4: the running maximum must keep every exponential finite.
// O and lse are also held to 2x the float32 unfused computation's error on the same inputs
// (testing.hpp), under the kLargeScoreTolerance cap.
class Ch03LargeScores : public ::testing::TestWithParam<Shape> {};

TEST_P(Ch03LargeScores, StaysFiniteAndAccurate) {
  FT_REQUIRE_GPU();
  ft::testing::expect_forward_correct(ch03::online(), GetParam().problem(),
                                      ft::InputKind::LargeScores,
                                      ft::testing::kLargeScoreTolerance);
}

INSTANTIATE_TEST_SUITE_P(Shapes, Ch03LargeScores,
                         ::testing::Values(Shape{17, 64, false}, Shape{17, 64, true},
                                           Shape{1000, 64, false}, Shape{1000, 64, true}),
                         [](const auto& info) { return ft::testing::shape_name(info.param); });

// ---- the row softmax ------------------------------------------------------------------------

// Rows 1 and 4 of every test hold values up to ±1e4 (exp overflows without the maximum);
// the others hold values of a few units.
constexpr int kRows = 6;
// Relative L2 tolerance of the ±1e4 rows. Not attention's large-logit cap (testing.hpp):
// these values are ten times larger, unscaled, and the kernels take them to base 2 first:
// x·log2 e ≈ 1.4e4 rounded to float is off by up to 2^-11 ≈ 4.9e-4 in the exponent, a
// relative error of up to 3.4e-4 in each probability (in the nearly one-hot rows, in the
// largest one); 2e-3 leaves margin and still fails on a lost max (Inf or NaN, not 1e-3).
constexpr double kLargeRowTolerance = 2e-3;
bool large_row(int r) { return r == 1 || r == 4; }

std::vector<float> row_inputs(int cols) {
  std::vector<float> x = ft::random_uniform(size_t(kRows) * cols, 77 + cols, -4.f, 4.f);
  for (int r = 0; r < kRows; ++r)
    if (large_row(r))
      for (int j = 0; j < cols; ++j) x[size_t(r) * cols + j] *= 2500.f;  // ±1e4
  return x;
}

/// Checks rows of `got` against float64, each row on its own: 1e-5 relative L2 for rows of a
/// few units; kLargeRowTolerance for ±1e4 rows, where x·log2 e rounds in the exponent.
void expect_rows_match(const std::vector<float>& in, const float* got, int cols) {
  for (int r = 0; r < kRows; ++r) {
    const auto ref = softmax_ref(&in[size_t(r) * cols], cols, cols);
    const double tol = large_row(r) ? kLargeRowTolerance : 1e-5;
    const ft::VerifyResult v = ft::verify("row", got + size_t(r) * cols, ref.data(), cols, tol);
    EXPECT_TRUE(v.ok) << "row " << r << ": " << v.message;
  }
}

struct RowCase {
  ch03::RowSoftmax variant;
  int cols;
};

std::string row_case_name(const RowCase& c) {
  return std::string(c.variant == ch03::RowSoftmax::Safe ? "safe" : "online") + "_C" +
         std::to_string(c.cols);
}

// Prints the case by name in test listings (instead of its bytes).
void PrintTo(const RowCase& c, std::ostream* os) { *os << row_case_name(c); }

class RowSoftmax : public ::testing::TestWithParam<RowCase> {};

TEST_P(RowSoftmax, MatchesFloat64) {
  FT_REQUIRE_GPU();
  const RowCase c = GetParam();
  const std::vector<float> in = row_inputs(c.cols);
  ft::DeviceBuffer<float> din(in.size()), dout(in.size());
  din.upload(in);
  dout.poison();
  ch03::row_softmax(c.variant, din.get(), dout.get(), kRows, c.cols, 0);
  CUDA_CHECK(cudaDeviceSynchronize());
  expect_rows_match(in, dout.download().data(), c.cols);
}

// In place (in == out), as the attention softmax runs.
TEST_P(RowSoftmax, InPlace) {
  FT_REQUIRE_GPU();
  const RowCase c = GetParam();
  const std::vector<float> in = row_inputs(c.cols);
  ft::DeviceBuffer<float> buf(in.size());
  buf.upload(in);
  ch03::row_softmax(c.variant, buf.get(), buf.get(), kRows, c.cols, 0);
  CUDA_CHECK(cudaDeviceSynchronize());
  expect_rows_match(in, buf.download().data(), c.cols);
}

std::vector<RowCase> row_cases() {
  std::vector<RowCase> cases;
  // 1, 17: odd (two-read path); 1000, 4096: small register kernel (4096 its largest row);
  // 4100, 16384: large register kernel (16384 = kRegisterRowMax); 16388, 40000: too long
  // for registers, two reads.
  for (auto v : {ch03::RowSoftmax::Safe, ch03::RowSoftmax::Online})
    for (int cols : {1, 17, 1000, 4096, 4100, 16384, 16388, 40000}) cases.push_back({v, cols});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, RowSoftmax, ::testing::ValuesIn(row_cases()),
                         [](const auto& info) { return row_case_name(info.param); });

// Rows that start 4 bytes past a 16-byte boundary cannot use float4: the online variant
// must notice and take the two-read path.
TEST(RowSoftmaxPaths, UnalignedRowsFallBack) {
  FT_REQUIRE_GPU();
  const int cols = 1000;
  const std::vector<float> in = row_inputs(cols);
  ft::DeviceBuffer<float> din(in.size() + 1), dout(in.size() + 1);
  CUDA_CHECK(cudaMemcpy(din.get() + 1, in.data(), in.size() * sizeof(float),
                        cudaMemcpyHostToDevice));
  dout.poison();
  ch03::row_softmax(ch03::RowSoftmax::Online, din.get() + 1, dout.get() + 1, kRows, cols, 0);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> out = dout.download();
  expect_rows_match(in, out.data() + 1, cols);
}

TEST(RowSoftmaxCApi, RunsAndRejectsBadArguments) {
  FT_REQUIRE_GPU();
  const int cols = 1000;
  const std::vector<float> in = row_inputs(cols);
  ft::DeviceBuffer<float> din(in.size()), dout(in.size());
  din.upload(in);
  for (int variant : {0, 1}) {
    dout.poison();
    EXPECT_EQ(ft_ch03_row_softmax(variant, din.get(), dout.get(), kRows, cols, 0), 0)
        << ft_last_error();
    CUDA_CHECK(cudaDeviceSynchronize());
    expect_rows_match(in, dout.download().data(), cols);
  }
  EXPECT_EQ(ft_ch03_row_softmax(2, din.get(), dout.get(), kRows, cols, 0), -1);
  EXPECT_NE(std::string(ft_last_error()), "");
  EXPECT_EQ(ft_ch03_row_softmax(1, din.get(), dout.get(), kRows, 0, 0), -1);
}

}  // namespace
