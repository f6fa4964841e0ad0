// GPU tests of chapter 05: every backward implementation against the float64 reference on the
// standard shapes (ragged N, causal and not, B·H = 6) and on overflow-bait inputs, each output
// tensor within 2x of the float32 unfused computation's error (testing.hpp); run twice
// (determinism), and the D kernel on its own. Every output is poisoned with NaN before a run,
// so an element a kernel forgets to write fails.
//
// (The variants are not compared with each other: each is held to the reference and the same
// baseline on the same inputs, which bounds their differences more tightly than a 1e-4
// agreement check did.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "05_backward/backward.hpp"
#include "device/buffer.cuh"
#include "reference/inputs.hpp"
#include "harness/testing.hpp"
#include "harness/verify.hpp"

namespace {

using ft::testing::Shape;

const std::vector<ft::BackwardImpl>& impls() {
  static const std::vector<ft::BackwardImpl> all = ch05::backward_impls();
  return all;
}

const ft::BackwardImpl& impl_named(const std::string& variant) {
  for (const auto& impl : impls())
    if (impl.variant == variant) return impl;
  throw std::invalid_argument("no chapter 05 variant " + variant);
}

using VariantShape = std::tuple<std::string, Shape>;

/// Every variant × the shapes it supports (its head_dims; any d: the standard 32, 64, 128).
/// flash_bc128 at d = 128 is left out: there its tile shape is flash's (WideKeyTiles<128> =
/// DefaultTiles<128>, the same kernel instantiation), so it would repeat flash's launches.
std::vector<VariantShape> variants_by(const std::vector<Shape>& shapes) {
  std::vector<VariantShape> params;
  for (const auto& impl : impls())
    for (const Shape& s : shapes) {
      if (impl.variant == ch05::flash_wide_keys().variant && s.head_dim == 128) continue;
      if (impl.head_dims.empty() || std::find(impl.head_dims.begin(), impl.head_dims.end(),
                                              s.head_dim) != impl.head_dims.end())
        params.emplace_back(impl.variant, s);
    }
  return params;
}

std::string variant_shape_name(const ::testing::TestParamInfo<VariantShape>& info) {
  return std::get<0>(info.param) + "_" + ft::testing::shape_name(std::get<1>(info.param));
}

/// Relative L2 distance of `got` from `want` (both float32), failing on NaN/Inf in `got`.
void expect_close(const char* name, const std::vector<float>& got, const std::vector<float>& want,
                  double tolerance) {
  ASSERT_EQ(got.size(), want.size()) << name;
  const std::vector<double> want64(want.begin(), want.end());
  const ft::VerifyResult r = ft::verify(name, got.data(), want64.data(), got.size(), tolerance);
  EXPECT_TRUE(r.ok) << r.message;
}

// ---- Every variant × the standard shapes, against the float64 reference ----------------------

class Backward : public ::testing::TestWithParam<VariantShape> {};

TEST_P(Backward, MatchesFloat64Reference) {
  FT_REQUIRE_GPU();
  const auto& [variant, shape] = GetParam();
  ft::testing::expect_backward_correct(impl_named(variant), shape.problem());
}

INSTANTIATE_TEST_SUITE_P(Ch05, Backward,
                         ::testing::ValuesIn(variants_by(ft::testing::standard_shapes())),
                         variant_shape_name);

// ---- Scores near ±1e4: exp overflows unless the saved log-sum-exp is subtracted first -------
// Held to the same rule: 2x the float32 unfused computation's error per tensor, under the
// kLargeScoreTolerance cap. README, "Precision on large logits", says what each variant's
// error is made of.

class BackwardLargeScores : public ::testing::TestWithParam<VariantShape> {};

TEST_P(BackwardLargeScores, FiniteAndAccurate) {
  FT_REQUIRE_GPU();
  const auto& [variant, shape] = GetParam();
  // The flash variants recompute P from the saved float32 lse: the rule allows them the
  // error one float per row carries (testing.hpp, lse_recompute_error); the baseline that
  // stores P is held to the rule itself.
  const ft::testing::PSource source = variant == "materialize" ? ft::testing::PSource::kStored
                                                               : ft::testing::PSource::kFromLse;
  ft::testing::expect_backward_correct(impl_named(variant), shape.problem(),
                                       ft::InputKind::LargeScores,
                                       ft::testing::kLargeScoreTolerance, source);
}

const std::vector<Shape> kLargeScoreShapes = {
    {17, 64, false}, {17, 64, true}, {1000, 64, false}, {1000, 64, true}};

INSTANTIATE_TEST_SUITE_P(Ch05, BackwardLargeScores,
                         ::testing::ValuesIn(variants_by(kLargeScoreShapes)), variant_shape_name);

// ---- Determinism: no atomics → bit-identical reruns ------------------------------------------

TEST(Ch05Determinism, RerunsRepeatBitForBitExceptAtomicDq) {
  FT_REQUIRE_GPU();
  const ft::Problem p = Shape{1000, 64, false}.problem();
  const ft::AttentionInputs in = ft::make_inputs(p, ft::InputKind::Uniform, 11);
  const auto a = ft::testing::run_backward(ch05::flash_dq_pass(), p, in);
  const auto b = ft::testing::run_backward(ch05::flash_dq_pass(), p, in);
  EXPECT_EQ(a.dQ, b.dQ) << "flash_dq_pass has no atomics: dQ must repeat bit for bit";
  EXPECT_EQ(a.dK, b.dK);
  EXPECT_EQ(a.dV, b.dV);
  // The atomic variant: dK and dV are still summed in a fixed order in registers.
  const auto c = ft::testing::run_backward(ch05::flash(), p, in);
  const auto e = ft::testing::run_backward(ch05::flash(), p, in);
  EXPECT_EQ(c.dK, e.dK);
  EXPECT_EQ(c.dV, e.dV);
  expect_close("dQ (atomic, rerun)", c.dQ, e.dQ, 1e-6);  // only the rounding order may differ
}

// ---- flash_sync: the copies differ, nothing computed does ------------------------------------

// flash_sync is flash with plain loads instead of cp.async (copy_sync.cuh against
// copy_async.cuh): the same arithmetic in the same order, so dK and dV (summed in registers)
// must come out bit for bit the same as flash's, and dQ (atomics) up to the order of its adds.
TEST(Ch05FlashSync, ComputesWhatFlashComputes) {
  FT_REQUIRE_GPU();
  for (const Shape& shape : {Shape{17, 32, false}, Shape{1000, 64, false}, Shape{1000, 128, true}}) {
    SCOPED_TRACE(ft::testing::shape_name(shape));
    const ft::Problem p = shape.problem();
    const ft::AttentionInputs in = ft::make_inputs(p, ft::InputKind::Uniform, 12);
    const auto async = ft::testing::run_backward(ch05::flash(), p, in);
    const auto sync = ft::testing::run_backward(ch05::flash_sync(), p, in);
    EXPECT_EQ(sync.dK, async.dK);
    EXPECT_EQ(sync.dV, async.dV);
    expect_close("dQ (flash_sync against flash)", sync.dQ, async.dQ, 1e-6);
  }
}

// ---- The D kernel alone ----------------------------------------------------------------------

TEST(Ch05ComputeD, MatchesCpuRowDotsAndClearsDq) {
  FT_REQUIRE_GPU();
  const int64_t rows = 2 * 3 * 1000 + 5;  // not a multiple of the 8 rows a block handles
  for (int d : {1, 5, 32, 64, 128}) {
    SCOPED_TRACE("d=" + std::to_string(d));
    const std::vector<float> O = ft::random_uniform(size_t(rows) * d, 1 + d);
    const std::vector<float> dO = ft::random_uniform(size_t(rows) * d, 2 + d);
    ft::DeviceBuffer<float> O_dev(O.size()), dO_dev(dO.size()), dQ_dev(O.size());
    ft::DeviceBuffer<float> D_dev(static_cast<size_t>(rows));
    O_dev.upload(O);
    dO_dev.upload(dO);
    D_dev.poison();
    dQ_dev.poison();
    ch05::compute_D(O_dev.get(), dO_dev.get(), D_dev.get(), rows, d, 0, dQ_dev.get());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> D = D_dev.download(), dQ = dQ_dev.download();
    for (int64_t r = 0; r < rows; ++r) {
      double want = 0, magnitude = 0;
      for (int k = 0; k < d; ++k) {
        want += double(O[r * d + k]) * dO[r * d + k];
        magnitude += std::fabs(double(O[r * d + k]) * dO[r * d + k]);
      }
      ASSERT_TRUE(std::isfinite(D[r])) << "row " << r;
      ASSERT_NEAR(D[r], want, 1e-6 * magnitude + 1e-30) << "row " << r;
    }
    for (size_t i = 0; i < dQ.size(); ++i) ASSERT_EQ(dQ[i], 0.f) << "dQ element " << i;
  }
}

// ---- Shapes the flash kernels refuse --------------------------------------------------------

TEST(Ch05Flash, RefusesOtherHeadDims) {
  FT_REQUIRE_GPU();
  ft::Problem p;
  p.len_q = p.len_kv = 16;
  p.head_dim = 48;
  ft::BackwardArgs a{};
  EXPECT_THROW(ch05::flash().run(p, a, 0), ft::Unsupported);
  EXPECT_THROW(ch05::flash_sync().run(p, a, 0), ft::Unsupported);
  EXPECT_THROW(ch05::flash_dq_pass().run(p, a, 0), ft::Unsupported);
  EXPECT_THROW(ch05::flash_wide_keys().run(p, a, 0), ft::Unsupported);
}

}  // namespace
