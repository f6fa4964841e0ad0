// CPU tests of the float64 reference: against a naive loop written from the definition,
// and its backward against finite differences of its forward.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "reference/inputs.hpp"
#include "reference/reference.hpp"

namespace {

using ft::Problem;

Problem small(int N, int d, bool causal) {
  Problem p;
  p.batch = 2;
  p.heads_q = p.heads_kv = 2;
  p.len_q = p.len_kv = N;
  p.head_dim = d;
  p.causal = causal;
  return p;
}

// Whether query i sees key j, written from the contract's words (docs/contracts.md), not from
// Problem::visible_keys: top-left j <= i, bottom-right j <= i + N_kv - N_q.
bool visible(const Problem& p, int i, int j) {
  if (!p.causal) return true;
  return p.align == ft::CausalAlign::TopLeft ? j <= i : j <= i + p.len_kv - p.len_q;
}

// Softmax straight from the definition (no max subtraction: fine for small inputs),
// materialising the whole N_q×N_kv matrix. Query head (b, h) reads key/value head
// (b, h / (H_q / H_kv)). A row with no visible key: O = 0, lse = -inf.
void naive_attention(const Problem& p, const std::vector<float>& Q, const std::vector<float>& K,
                     const std::vector<float>& V, std::vector<double>& O, std::vector<double>& lse) {
  const int Nq = p.len_q, Nk = p.len_kv, d = p.head_dim;
  O.assign(p.elems(), 0);
  lse.assign(p.rows(), 0);
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_q; ++h) {
      const int64_t qh = int64_t(b) * p.heads_q + h;
      const int64_t kh = int64_t(b) * p.heads_kv + h / (p.heads_q / p.heads_kv);
      const int64_t qbase = qh * Nq * d, kbase = kh * Nk * d;
      std::vector<double> S(size_t(Nq) * Nk, 0.0);
      for (int i = 0; i < Nq; ++i)
        for (int j = 0; j < Nk; ++j) {
          double s = 0;
          for (int c = 0; c < d; ++c) s += double(Q[qbase + i * d + c]) * K[kbase + j * d + c];
          S[size_t(i) * Nk + j] = visible(p, i, j) ? std::exp(s * p.softmax_scale()) : 0.0;
        }
      for (int i = 0; i < Nq; ++i) {
        double z = 0;
        for (int j = 0; j < Nk; ++j) z += S[size_t(i) * Nk + j];
        lse[qh * Nq + i] = std::log(z);  // log(0) = -inf for a row that sees nothing
        if (z == 0) continue;
        for (int j = 0; j < Nk; ++j)
          for (int c = 0; c < d; ++c)
            O[qbase + i * d + c] += S[size_t(i) * Nk + j] / z * V[kbase + j * d + c];
      }
    }
}

// The problems the reference is checked on: self-attention (the parameter's causal flag),
// then two lengths either way round with both alignments, and grouped heads.
std::vector<Problem> kv_problems(int d, bool causal) {
  std::vector<Problem> out;
  for (auto [nq, nk] : {std::pair{5, 11}, std::pair{11, 5}, std::pair{1, 7}, std::pair{7, 1}})
    for (auto a : {ft::CausalAlign::TopLeft, ft::CausalAlign::BottomRight}) {
      Problem p = ft::with_kv(small(nq, d, causal), nk, 2, a);
      out.push_back(p);
    }
  Problem g = ft::with_kv(small(6, d, causal), 9, 1, ft::CausalAlign::BottomRight);
  g.heads_q = 4;  // 4 query heads over one key/value head (multi-query)
  out.push_back(g);
  g = ft::with_kv(small(6, d, causal), 6, 2);
  g.heads_q = 6;  // grouped-query: 3 query heads a key/value head
  out.push_back(g);
  return out;
}

class ReferenceForward : public ::testing::TestWithParam<bool> {};

TEST_P(ReferenceForward, MatchesNaiveLoop) {
  const Problem p = small(13, 8, GetParam());
  const auto in = ft::make_inputs(p, ft::InputKind::Uniform, 7);
  std::vector<double> O(p.elems()), lse(p.rows()), nO, nlse;
  ft::reference_forward(p, in.Q.data(), in.K.data(), in.V.data(), O.data(), lse.data());
  naive_attention(p, in.Q, in.K, in.V, nO, nlse);
  for (size_t i = 0; i < O.size(); ++i) ASSERT_NEAR(O[i], nO[i], 1e-12) << "O[" << i << "]";
  for (size_t i = 0; i < lse.size(); ++i) ASSERT_NEAR(lse[i], nlse[i], 1e-12) << "lse[" << i << "]";
}

TEST_P(ReferenceForward, TwoLengthsAndGroupedHeadsMatchNaiveLoop) {
  for (const Problem& p : kv_problems(4, GetParam())) {
    SCOPED_TRACE(p.describe());
    const auto in = ft::make_inputs(p, ft::InputKind::Uniform, 19);
    ASSERT_EQ(in.K.size(), size_t(p.kv_elems()));
    std::vector<double> O(p.elems()), lse(p.rows()), nO, nlse;
    ft::reference_forward(p, in.Q.data(), in.K.data(), in.V.data(), O.data(), lse.data());
    naive_attention(p, in.Q, in.K, in.V, nO, nlse);
    for (size_t i = 0; i < O.size(); ++i) ASSERT_NEAR(O[i], nO[i], 1e-12) << "O[" << i << "]";
    for (size_t i = 0; i < lse.size(); ++i) {
      if (std::isinf(nlse[i])) ASSERT_EQ(lse[i], nlse[i]) << "lse[" << i << "]";
      else ASSERT_NEAR(lse[i], nlse[i], 1e-12) << "lse[" << i << "]";
    }
  }
}

TEST_P(ReferenceForward, RowRangeMatchesWholeHead) {
  const Problem p = small(21, 4, GetParam());
  const auto in = ft::make_inputs(p, ft::InputKind::Uniform, 3);
  std::vector<double> O(p.elems()), lse(p.rows());
  ft::reference_forward(p, in.Q.data(), in.K.data(), in.V.data(), O.data(), lse.data());
  const int64_t h = 3;
  std::vector<double> part(5 * 4), plse(5);
  ft::reference_forward_rows(p, in.Q.data(), in.K.data(), in.V.data(), h, 10, 15, part.data(), plse.data());
  for (int r = 0; r < 5; ++r) {
    EXPECT_EQ(plse[r], lse[h * 21 + 10 + r]);
    for (int c = 0; c < 4; ++c) EXPECT_EQ(part[r * 4 + c], O[(h * 21 + 10 + r) * 4 + c]);
  }
}

INSTANTIATE_TEST_SUITE_P(CausalAndNot, ReferenceForward, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& param_info) { return param_info.param ? "causal" : "full"; });

TEST(ReferenceForward, CausalFirstRowCopiesFirstValue) {
  // Query 0 sees only key 0, so P = [1] and O_0 = v_0, lse_0 = scale·q_0·k_0.
  const Problem p = small(9, 4, true);
  const auto in = ft::make_inputs(p, ft::InputKind::Uniform, 11);
  std::vector<double> O(p.elems()), lse(p.rows());
  ft::reference_forward(p, in.Q.data(), in.K.data(), in.V.data(), O.data(), lse.data());
  double s = 0;
  for (int c = 0; c < 4; ++c) {
    EXPECT_NEAR(O[c], in.V[c], 1e-15);
    s += double(in.Q[c]) * in.K[c];
  }
  EXPECT_NEAR(lse[0], s * p.softmax_scale(), 1e-12);
}

// Worked by hand. Three queries over six keys (problem.hpp's drawing), causal:
//   top-left:     query 0 sees key 0 alone, so O_0 = v_0 and lse_0 = scale·q_0·k_0;
//   bottom-right: query 2 (the last) sees all six keys, query 0 the first four.
// Six queries over three keys, bottom-right: queries 0-2 see nothing (O = 0, lse = -inf),
// query 3 sees key 0 alone.
TEST(ReferenceForward, CausalAlignmentsByHand) {
  const auto dot = [](const float* a, const float* b, int d) {
    double s = 0;
    for (int c = 0; c < d; ++c) s += double(a[c]) * b[c];
    return s;
  };
  const int d = 4;
  Problem p = ft::with_kv(small(3, d, true), 6, 2, ft::CausalAlign::TopLeft);
  auto in = ft::make_inputs(p, ft::InputKind::Uniform, 23);
  std::vector<double> O(p.elems()), lse(p.rows());
  ft::reference_forward(p, in.Q.data(), in.K.data(), in.V.data(), O.data(), lse.data());
  for (int c = 0; c < d; ++c) EXPECT_NEAR(O[c], in.V[c], 1e-15);
  EXPECT_NEAR(lse[0], p.softmax_scale() * dot(&in.Q[0], &in.K[0], d), 1e-12);

  p.align = ft::CausalAlign::BottomRight;
  EXPECT_EQ(p.visible_keys(0), 4);
  EXPECT_EQ(p.visible_keys(2), 6);
  ft::reference_forward(p, in.Q.data(), in.K.data(), in.V.data(), O.data(), lse.data());
  double z = 0;  // query 2 of head 0: the log-sum-exp over all six keys
  for (int j = 0; j < 6; ++j) z += std::exp(p.softmax_scale() * dot(&in.Q[2 * d], &in.K[j * d], d));
  EXPECT_NEAR(lse[2], std::log(z), 1e-12);

  p = ft::with_kv(small(6, d, true), 3, 2, ft::CausalAlign::BottomRight);
  in = ft::make_inputs(p, ft::InputKind::Uniform, 29);
  O.assign(p.elems(), 1.0);
  lse.assign(p.rows(), 1.0);
  ft::reference_forward(p, in.Q.data(), in.K.data(), in.V.data(), O.data(), lse.data());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(lse[i], -INFINITY) << "query " << i << " sees no key";
    for (int c = 0; c < d; ++c) EXPECT_EQ(O[i * d + c], 0.0);
  }
  for (int c = 0; c < d; ++c) EXPECT_NEAR(O[3 * d + c], in.V[c], 1e-15);
  // The FLOPs count the visible area: 6 queries over 3 keys, bottom-right, is the triangle
  // of the last three queries, 3²/2 pairs a head, as the papers count N²/2 for N = 3.
  EXPECT_DOUBLE_EQ(p.attended_pairs(), 4.5);
  EXPECT_DOUBLE_EQ(ft::with_kv(small(3, d, true), 6, 2, ft::CausalAlign::BottomRight).attended_pairs(),
                   3 * 6 - 4.5);
}

// Grouped heads by hand: with one key/value head, every query head reads the same K and V,
// so two query heads with equal queries give equal outputs, and dK, dV are the sum of what
// each query head would give alone.
TEST(ReferenceBackward, GroupedHeadsSumTheirContributions) {
  Problem p = ft::with_kv(small(5, 4, true), 7, 1, ft::CausalAlign::BottomRight);
  p.batch = 1;
  p.heads_q = 2;
  auto in = ft::make_inputs(p, ft::InputKind::Uniform, 31);
  std::vector<double> dQ(p.elems()), dK(p.kv_elems()), dV(p.kv_elems());
  ft::reference_backward(p, in.Q.data(), in.K.data(), in.V.data(), in.dO.data(), dQ.data(), dK.data(), dV.data());
  std::vector<double> sumK(p.kv_elems(), 0.0), sumV(p.kv_elems(), 0.0);
  for (int h = 0; h < 2; ++h) {
    Problem one = p;
    one.heads_q = 1;
    const size_t q0 = size_t(h) * 5 * 4;
    const std::vector<float> Q(in.Q.begin() + q0, in.Q.begin() + q0 + 20),
        dO(in.dO.begin() + q0, in.dO.begin() + q0 + 20);
    std::vector<double> a(20), b(p.kv_elems()), c(p.kv_elems());
    ft::reference_backward(one, Q.data(), in.K.data(), in.V.data(), dO.data(), a.data(), b.data(), c.data());
    for (int x = 0; x < 20; ++x) EXPECT_DOUBLE_EQ(dQ[q0 + x], a[x]);
    for (int64_t x = 0; x < p.kv_elems(); ++x) sumK[x] += b[x], sumV[x] += c[x];
  }
  for (int64_t x = 0; x < p.kv_elems(); ++x) {
    EXPECT_NEAR(dK[x], sumK[x], 1e-15);
    EXPECT_NEAR(dV[x], sumV[x], 1e-15);
  }
}

TEST(ReferenceForward, LargeScoresStayFinite) {
  // Scores near 1e4: exp overflows unless the row maximum is subtracted first.
  const Problem p = small(40, 64, false);
  const auto in = ft::make_inputs(p, ft::InputKind::LargeScores, 5);
  std::vector<double> O(p.elems()), lse(p.rows());
  ft::reference_forward(p, in.Q.data(), in.K.data(), in.V.data(), O.data(), lse.data());
  double max_lse = 0;
  for (double x : O) ASSERT_TRUE(std::isfinite(x));
  for (double x : lse) {
    ASSERT_TRUE(std::isfinite(x));
    max_lse = std::max(max_lse, x);
  }
  EXPECT_GT(max_lse, 100.0) << "LargeScores should produce scores far beyond exp's range";
}

// Loss Σ O∘dO for double inputs (the function whose gradient the backward computes).
double loss(const Problem& p, const std::vector<double>& Q, const std::vector<double>& K,
            const std::vector<double>& V, const std::vector<double>& dO) {
  std::vector<double> O(p.elems()), lse(p.rows());
  ft::reference_forward(p, Q.data(), K.data(), V.data(), O.data(), lse.data());
  double f = 0;
  for (size_t i = 0; i < O.size(); ++i) f += O[i] * dO[i];
  return f;
}

class ReferenceBackward : public ::testing::TestWithParam<bool> {};

void expect_gradients_match_finite_differences(const Problem& p, int stride) {
  const auto in = ft::make_inputs(p, ft::InputKind::Uniform, 13);
  std::vector<double> Q(in.Q.begin(), in.Q.end()), K(in.K.begin(), in.K.end()),
      V(in.V.begin(), in.V.end()), dO(in.dO.begin(), in.dO.end());
  std::vector<double> dQ(p.elems()), dK(p.kv_elems()), dV(p.kv_elems());
  ft::reference_backward(p, Q.data(), K.data(), V.data(), dO.data(), dQ.data(), dK.data(), dV.data());

  const double h = 1e-6;  // central differences: error ~h² ≈ 1e-12, rounding ~1e-16/h ≈ 1e-10
  struct Tensor {
    const char* name;
    std::vector<double>* x;
    const std::vector<double>* grad;
  };
  for (Tensor t : {Tensor{"Q", &Q, &dQ}, Tensor{"K", &K, &dK}, Tensor{"V", &V, &dV}})
    for (size_t i = 0; i < t.x->size(); i += stride) {  // all heads, rows, cols
      const double keep = (*t.x)[i];
      (*t.x)[i] = keep + h;
      const double up = loss(p, Q, K, V, dO);
      (*t.x)[i] = keep - h;
      const double down = loss(p, Q, K, V, dO);
      (*t.x)[i] = keep;
      EXPECT_NEAR((*t.grad)[i], (up - down) / (2 * h), 1e-7) << "d" << t.name << "[" << i << "]";
    }
}

TEST_P(ReferenceBackward, MatchesFiniteDifferences) {
  expect_gradients_match_finite_differences(small(6, 5, GetParam()), 7);  // every 7th element
}

TEST_P(ReferenceBackward, TwoLengthsAndGroupedHeadsMatchFiniteDifferences) {
  for (const Problem& p : kv_problems(3, GetParam())) {
    SCOPED_TRACE(p.describe());
    expect_gradients_match_finite_differences(p, 5);
  }
}

TEST_P(ReferenceBackward, FloatAndDoubleInputsAgree) {
  const Problem p = small(7, 3, GetParam());
  const auto in = ft::make_inputs(p, ft::InputKind::Uniform, 17);
  std::vector<double> Q(in.Q.begin(), in.Q.end()), K(in.K.begin(), in.K.end()),
      V(in.V.begin(), in.V.end()), dO(in.dO.begin(), in.dO.end());
  std::vector<double> a(p.elems()), b(p.kv_elems()), c(p.kv_elems()), x(p.elems()), y(p.kv_elems()), z(p.kv_elems());
  ft::reference_backward(p, in.Q.data(), in.K.data(), in.V.data(), in.dO.data(), a.data(), b.data(), c.data());
  ft::reference_backward(p, Q.data(), K.data(), V.data(), dO.data(), x.data(), y.data(), z.data());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_DOUBLE_EQ(a[i], x[i]);
    EXPECT_DOUBLE_EQ(b[i], y[i]);
    EXPECT_DOUBLE_EQ(c[i], z[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(CausalAndNot, ReferenceBackward, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& param_info) { return param_info.param ? "causal" : "full"; });

TEST(Inputs, DeterministicAndNotZero) {
  const auto a = ft::random_uniform(1000, 42), b = ft::random_uniform(1000, 42),
             c = ft::random_uniform(1000, 43);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  double mean = 0;
  int zeros = 0;
  for (float x : a) {
    ASSERT_GE(x, -1.f);
    ASSERT_LT(x, 1.f);
    mean += x;
    zeros += x == 0.f;
  }
  EXPECT_NEAR(mean / 1000, 0.0, 0.1);
  EXPECT_EQ(zeros, 0);
}

}  // namespace
