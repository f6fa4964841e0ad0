// CPU tests of the float64 reference: against a naive loop written from the definition,
// and its backward against finite differences of its forward.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "inputs.hpp"
#include "reference.hpp"

namespace {

using ft::Problem;

Problem small(int N, int d, bool causal) {
  Problem p;
  p.batch = 2;
  p.heads = 2;
  p.seq_len = N;
  p.head_dim = d;
  p.causal = causal;
  return p;
}

// Softmax straight from the definition (no max subtraction: fine for small inputs),
// materialising the whole N×N matrix.
void naive_attention(const Problem& p, const std::vector<float>& Q, const std::vector<float>& K,
                     const std::vector<float>& V, std::vector<double>& O, std::vector<double>& lse) {
  const int N = p.seq_len, d = p.head_dim;
  O.assign(p.elems(), 0);
  lse.assign(p.rows(), 0);
  for (int64_t h = 0; h < p.heads_total(); ++h) {
    const int64_t base = h * N * d;
    std::vector<double> S(size_t(N) * N, 0.0);
    for (int i = 0; i < N; ++i)
      for (int j = 0; j < N; ++j) {
        double s = 0;
        for (int c = 0; c < d; ++c) s += double(Q[base + i * d + c]) * K[base + j * d + c];
        S[size_t(i) * N + j] = (p.causal && j > i) ? 0.0 : std::exp(s * p.softmax_scale());
      }
    for (int i = 0; i < N; ++i) {
      double z = 0;
      for (int j = 0; j < N; ++j) z += S[size_t(i) * N + j];
      lse[h * N + i] = std::log(z);
      for (int j = 0; j < N; ++j)
        for (int c = 0; c < d; ++c) O[base + i * d + c] += S[size_t(i) * N + j] / z * V[base + j * d + c];
    }
  }
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

TEST_P(ReferenceBackward, MatchesFiniteDifferences) {
  const Problem p = small(6, 5, GetParam());
  const auto in = ft::make_inputs(p, ft::InputKind::Uniform, 13);
  std::vector<double> Q(in.Q.begin(), in.Q.end()), K(in.K.begin(), in.K.end()),
      V(in.V.begin(), in.V.end()), dO(in.dO.begin(), in.dO.end());
  std::vector<double> dQ(p.elems()), dK(p.elems()), dV(p.elems());
  ft::reference_backward(p, Q.data(), K.data(), V.data(), dO.data(), dQ.data(), dK.data(), dV.data());

  const double h = 1e-6;  // central differences: error ~h² ≈ 1e-12, rounding ~1e-16/h ≈ 1e-10
  struct Tensor {
    const char* name;
    std::vector<double>* x;
    const std::vector<double>* grad;
  };
  for (Tensor t : {Tensor{"Q", &Q, &dQ}, Tensor{"K", &K, &dK}, Tensor{"V", &V, &dV}})
    for (size_t i = 0; i < t.x->size(); i += 7) {  // every 7th element: all heads, rows, cols
      const double keep = (*t.x)[i];
      (*t.x)[i] = keep + h;
      const double up = loss(p, Q, K, V, dO);
      (*t.x)[i] = keep - h;
      const double down = loss(p, Q, K, V, dO);
      (*t.x)[i] = keep;
      EXPECT_NEAR((*t.grad)[i], (up - down) / (2 * h), 1e-7) << "d" << t.name << "[" << i << "]";
    }
}

TEST_P(ReferenceBackward, FloatAndDoubleInputsAgree) {
  const Problem p = small(7, 3, GetParam());
  const auto in = ft::make_inputs(p, ft::InputKind::Uniform, 17);
  std::vector<double> Q(in.Q.begin(), in.Q.end()), K(in.K.begin(), in.K.end()),
      V(in.V.begin(), in.V.end()), dO(in.dO.begin(), in.dO.end());
  std::vector<double> a(p.elems()), b(p.elems()), c(p.elems()), x(p.elems()), y(p.elems()), z(p.elems());
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
