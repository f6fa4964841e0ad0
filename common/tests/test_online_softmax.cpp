// CPU tests of the online-softmax piece (common/cuda_core/online_softmax.cuh) that chapters 03–05
// run on the GPU: it must give the exact max, the sum to rounding, merge partial results
// in any split and order, and never produce NaN on masked (-inf) scores.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "reference/inputs.hpp"
#include "cuda_core/online_softmax.cuh"

namespace {

using ft::OnlineSoftmax;
constexpr float kInf = std::numeric_limits<float>::infinity();

// Exact (float64) max and Σ 2^(x − max) of a row in base-2 units.
void exact(const std::vector<float>& x, double& m, double& l) {
  m = -INFINITY;
  for (float v : x) m = std::max(m, double(v));
  l = 0;
  for (float v : x) l += std::exp2(double(v) - (std::isinf(m) ? 0.0 : m));
}

std::vector<float> row(size_t n, uint64_t seed, float magnitude) {
  return ft::random_uniform(n, seed, -magnitude, magnitude);
}

TEST(OnlineSoftmax, PushGivesExactMaxAndSum) {
  for (float magnitude : {1.f, 30.f, 1e4f}) {
    const auto x = row(1000, 1, magnitude);
    OnlineSoftmax s = ft::online_softmax_empty();
    for (float v : x) ft::online_push(s, v);
    double m, l;
    exact(x, m, l);
    EXPECT_EQ(s.m, float(m)) << "the running max is exact";
    EXPECT_NEAR(s.l, l, 1e-5 * l) << "magnitude " << magnitude;
    EXPECT_GE(s.l, 1.f) << "the max element itself contributes 2^0 = 1";
  }
}

TEST(OnlineSoftmax, TileRescaleMatchesPush) {
  const auto x = row(257, 2, 20.f);
  OnlineSoftmax a = ft::online_softmax_empty(), b = ft::online_softmax_empty();
  for (float v : x) ft::online_push(a, v);
  for (size_t t = 0; t < x.size(); t += 64) {  // tiles of 64, the last one partial
    float tile_max = -kInf;
    for (size_t j = t; j < std::min(x.size(), t + 64); ++j) tile_max = std::max(tile_max, x[j]);
    ft::online_rescale(b, tile_max);
    for (size_t j = t; j < std::min(x.size(), t + 64); ++j)
      b.l += std::exp2(x[j] - ft::online_exp_base(b.m));
  }
  EXPECT_EQ(a.m, b.m);
  EXPECT_NEAR(a.l, b.l, 1e-5 * a.l);
}

TEST(OnlineSoftmax, RescaleReturnsFactorForAccumulators) {
  OnlineSoftmax s = ft::online_softmax_empty();
  EXPECT_EQ(ft::online_rescale(s, 3.f), 0.f) << "nothing accumulated yet: factor 0, not NaN";
  s.l = 1.f;
  EXPECT_FLOAT_EQ(ft::online_rescale(s, 5.f), 0.25f) << "2^(3-5)";
  EXPECT_FLOAT_EQ(s.l, 0.25f);
  EXPECT_FLOAT_EQ(ft::online_rescale(s, 4.f), 1.f) << "a smaller tile max changes nothing";
}

TEST(OnlineSoftmax, MergeOfAnySplitEqualsWhole) {
  const auto x = row(300, 3, 50.f);
  double m, l;
  exact(x, m, l);
  for (size_t split : {size_t(0), size_t(1), size_t(150), size_t(299), size_t(300)}) {
    OnlineSoftmax a = ft::online_softmax_empty(), b = ft::online_softmax_empty();
    for (size_t j = 0; j < split; ++j) ft::online_push(a, x[j]);
    for (size_t j = split; j < x.size(); ++j) ft::online_push(b, x[j]);
    const OnlineSoftmax ab = ft::online_merge(a, b), ba = ft::online_merge(b, a);
    EXPECT_EQ(ab.m, float(m)) << "split " << split;
    EXPECT_NEAR(ab.l, l, 1e-5 * l) << "split " << split;
    EXPECT_EQ(ab.m, ba.m);
    EXPECT_NEAR(ab.l, ba.l, 1e-6 * l) << "merge is commutative";
  }
}

TEST(OnlineSoftmax, TreeMergeLikeAWarp) {
  // 32 lanes each fold a strided share of the row, then merge pairwise (as warp_merge does).
  const auto x = row(1000, 4, 1e4f);
  std::vector<OnlineSoftmax> lane(32, ft::online_softmax_empty());
  for (size_t j = 0; j < x.size(); ++j) ft::online_push(lane[j % 32], x[j]);
  for (int offset = 16; offset > 0; offset /= 2)
    for (int i = 0; i < offset; ++i) lane[i] = ft::online_merge(lane[i], lane[i + offset]);
  double m, l;
  exact(x, m, l);
  EXPECT_EQ(lane[0].m, float(m));
  EXPECT_NEAR(lane[0].l, l, 1e-5 * l);
}

TEST(OnlineSoftmax, MaskedScoresNeverMakeNaN) {
  // A row (or a tile of it) whose scores are all masked: (-inf) - (-inf) must not appear.
  OnlineSoftmax s = ft::online_softmax_empty();
  for (int i = 0; i < 5; ++i) ft::online_push(s, -kInf);
  EXPECT_EQ(s.m, -kInf);
  EXPECT_EQ(s.l, 0.f);
  EXPECT_FALSE(std::isnan(ft::online_rescale(s, -kInf)));
  EXPECT_EQ(ft::online_lse(s), -kInf);
  const OnlineSoftmax e = ft::online_merge(ft::online_softmax_empty(), ft::online_softmax_empty());
  EXPECT_EQ(e.l, 0.f);
  EXPECT_FALSE(std::isnan(e.l));
  // Masked scores first, then real ones: the result ignores the masked ones.
  ft::online_push(s, 2.f);
  ft::online_push(s, -kInf);
  ft::online_push(s, 2.f);
  EXPECT_EQ(s.m, 2.f);
  EXPECT_FLOAT_EQ(s.l, 2.f);
}

TEST(OnlineSoftmax, LseInNaturalUnits) {
  // Scores s in natural units enter as x = s·log2(e); lse must come back as ln Σ e^s.
  const auto s = row(100, 5, 10.f);
  OnlineSoftmax st = ft::online_softmax_empty();
  double z = 0;
  for (float v : s) {
    ft::online_push(st, v * ft::kLog2e);
    z += std::exp(double(v));
  }
  EXPECT_NEAR(ft::online_lse(st), std::log(z), 1e-5);
}

}  // namespace
