/// @file reference.cpp
/// The float64 reference, straight from the definitions. Loops are ordered so the inner
/// one runs over contiguous memory; OpenMP (when available) splits the rows of a head.
#include "reference/reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace ft {

namespace {

template <typename T>
double dot(const T* a, const T* b, int d) {
  double acc = 0;
  for (int c = 0; c < d; ++c) acc += double(a[c]) * double(b[c]);
  return acc;
}

/// Row i's scores s_j = scale·q_i·k_j for the keys it sees, j < visible_keys(i) (a prefix:
/// problem.hpp draws the mask); returns that count.
template <typename T>
int scores_row(const Problem& p, const T* q_i, const T* k, int i, std::vector<double>& s) {
  const int d = p.head_dim;
  const int visible = p.visible_keys(i);
  const double scale = p.softmax_scale();
  for (int j = 0; j < visible; ++j) s[j] = scale * dot(q_i, k + int64_t(j) * d, d);
  return visible;
}

/// Turns scores into probabilities in place (safe softmax); returns the log-sum-exp, −∞ for
/// a row that sees no key (its probabilities are then no values at all: O_i = 0).
double softmax_row(std::vector<double>& s, int visible) {
  if (visible == 0) return -std::numeric_limits<double>::infinity();
  double m = -std::numeric_limits<double>::infinity();
  for (int j = 0; j < visible; ++j) m = std::max(m, s[j]);
  double l = 0;
  for (int j = 0; j < visible; ++j) l += std::exp(s[j] - m);
  for (int j = 0; j < visible; ++j) s[j] = std::exp(s[j] - m) / l;
  return m + std::log(l);
}

}  // namespace

template <typename T>
void reference_forward_rows(const Problem& p, const T* Q, const T* K, const T* V, int64_t bh,
                            int row_begin, int row_end, double* O_out, double* lse_out) {
  const int d = p.head_dim;
  const int64_t kv = p.kv_head(bh) * int64_t(p.len_kv) * d;  // its key/value head (grouped)
  const T *q = Q + bh * int64_t(p.len_q) * d, *k = K + kv, *v = V + kv;
#pragma omp parallel
  {
    std::vector<double> s(p.len_kv);
#pragma omp for schedule(dynamic, 8)
    for (int i = row_begin; i < row_end; ++i) {
      const int visible = scores_row(p, q + int64_t(i) * d, k, i, s);
      const double lse = softmax_row(s, visible);
      double* o = O_out + int64_t(i - row_begin) * d;
      std::fill(o, o + d, 0.0);
      for (int j = 0; j < visible; ++j)  // O_i = Σ_j P_ij · v_j
        for (int c = 0; c < d; ++c) o[c] += s[j] * double(v[int64_t(j) * d + c]);
      lse_out[i - row_begin] = lse;
    }
  }
}

template <typename T>
void reference_forward(const Problem& p, const T* Q, const T* K, const T* V, double* O,
                       double* lse) {
  const int N = p.len_q, d = p.head_dim;
  for (int64_t bh = 0; bh < p.heads_total(); ++bh)
    reference_forward_rows(p, Q, K, V, bh, 0, N, O + bh * int64_t(N) * d, lse + bh * N);
}

template <typename T>
void reference_backward_head(const Problem& p, const T* Q, const T* K, const T* V, const T* dO,
                             int64_t bh, double* dQ, double* dK, double* dV) {
  const int Nq = p.len_q, Nk = p.len_kv, d = p.head_dim;
  const int64_t head = bh * int64_t(Nq) * d, kv = p.kv_head(bh) * int64_t(Nk) * d;
  const T *q = Q + head, *k = K + kv, *v = V + kv, *dout = dO + head;
  const double scale = p.softmax_scale();
  std::fill(dK, dK + int64_t(Nk) * d, 0.0);
  std::fill(dV, dV + int64_t(Nk) * d, 0.0);
#pragma omp parallel
  {
    std::vector<double> P(Nk), dS(Nk), o(d);
    std::vector<double> dK_local(int64_t(Nk) * d, 0.0), dV_local(int64_t(Nk) * d, 0.0);
#pragma omp for schedule(dynamic, 8)
    for (int i = 0; i < Nq; ++i) {
      const T* q_i = q + int64_t(i) * d;
      const T* do_i = dout + int64_t(i) * d;
      const int visible = scores_row(p, q_i, k, i, P);
      softmax_row(P, visible);  // P_ij
      std::fill(o.begin(), o.end(), 0.0);
      for (int j = 0; j < visible; ++j)
        for (int c = 0; c < d; ++c) o[c] += P[j] * double(v[int64_t(j) * d + c]);
      double D = 0;  // D_i = rowsum(dO ∘ O) = Σ_j P_ij dP_ij
      for (int c = 0; c < d; ++c) D += double(do_i[c]) * o[c];
      for (int j = 0; j < visible; ++j) {
        const double dP = dot(do_i, v + int64_t(j) * d, d);  // dP_ij = dO_i · v_j
        dS[j] = P[j] * (dP - D);                              // dS = P ∘ (dP − D)
      }
      double* dq_i = dQ + int64_t(i) * d;
      std::fill(dq_i, dq_i + d, 0.0);
      for (int j = 0; j < visible; ++j) {
        const T* k_j = k + int64_t(j) * d;
        double* dk_j = &dK_local[int64_t(j) * d];
        double* dv_j = &dV_local[int64_t(j) * d];
        for (int c = 0; c < d; ++c) {
          dq_i[c] += scale * dS[j] * double(k_j[c]);   // dQ = scale · dS · K
          dk_j[c] += scale * dS[j] * double(q_i[c]);   // dK = scale · dSᵀ · Q
          dv_j[c] += P[j] * double(do_i[c]);           // dV = Pᵀ · dO
        }
      }
    }
#pragma omp critical
    for (int64_t x = 0; x < int64_t(Nk) * d; ++x) {
      dK[x] += dK_local[x];
      dV[x] += dV_local[x];
    }
  }
}

template <typename T>
void reference_backward(const Problem& p, const T* Q, const T* K, const T* V, const T* dO,
                        double* dQ, double* dK, double* dV) {
  const int64_t q_head = int64_t(p.len_q) * p.head_dim, kv_head = int64_t(p.len_kv) * p.head_dim;
  std::fill(dK, dK + p.kv_elems(), 0.0);
  std::fill(dV, dV + p.kv_elems(), 0.0);
  std::vector<double> dk(static_cast<size_t>(kv_head)), dv(static_cast<size_t>(kv_head));
  // The gradient of a key/value head sums the contributions of every query head that reads
  // it (grouped heads), in the order of the query heads.
  for (int64_t bh = 0; bh < p.heads_total(); ++bh) {
    reference_backward_head(p, Q, K, V, dO, bh, dQ + bh * q_head, dk.data(), dv.data());
    const int64_t at = p.kv_head(bh) * kv_head;
    for (int64_t x = 0; x < kv_head; ++x) {
      dK[at + x] += dk[size_t(x)];
      dV[at + x] += dv[size_t(x)];
    }
  }
}

#define FT_INSTANTIATE(T)                                                                  \
  template void reference_forward_rows<T>(const Problem&, const T*, const T*, const T*,    \
                                          int64_t, int, int, double*, double*);            \
  template void reference_forward<T>(const Problem&, const T*, const T*, const T*, double*, \
                                     double*);                                             \
  template void reference_backward_head<T>(const Problem&, const T*, const T*, const T*,   \
                                           const T*, int64_t, double*, double*, double*);  \
  template void reference_backward<T>(const Problem&, const T*, const T*, const T*,        \
                                      const T*, double*, double*, double*);
FT_INSTANTIATE(float)
FT_INSTANTIATE(double)
#undef FT_INSTANTIATE

}  // namespace ft
