/// @file precision.cpp
/// The same-precision unfused computation (precision.hpp), one head at a time.
///
/// Every product is a sum of fused multiply-adds in the order of its index (k = 0, 1, ...),
/// one accumulator per output, as a CUDA-core or tensor-core kernel would form it. The loops
/// are written as y += a·x over contiguous rows, so that each output keeps its own sequential
/// chain while the compiler vectorizes across outputs; on x86 the FMA instruction is chosen at
/// run time (a CPU without it gets the exact library fmaf, slower, same numbers).
#include "reference/precision.hpp"

#include <fcntl.h>
#include <sys/file.h>

#include <unistd.h>  // getpid: unique temporary names in the cache directory

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "reference/reference.hpp"

namespace ft {

namespace {

#if defined(__x86_64__) && defined(__GNUC__) && defined(__ELF__) && !defined(__clang__)
#define FT_FMA_CLONES __attribute__((target_clones("fma", "default")))
#else
#define FT_FMA_CLONES
#endif

FT_FMA_CLONES void fma_axpy_impl(int n, float a, const float* __restrict x, float* __restrict y) {
  for (int i = 0; i < n; ++i) y[i] = std::fma(a, x[i], y[i]);
}

FT_FMA_CLONES float fma_dot_impl(int n, const float* a, const float* b) {
  float acc = 0.f;
  for (int k = 0; k < n; ++k) acc = std::fma(a[k], b[k], acc);
  return acc;
}

/// [rows][cols] → [cols][rows].
std::vector<float> transpose(const float* x, int rows, int cols) {
  std::vector<float> t(size_t(rows) * cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) t[size_t(c) * rows + r] = x[size_t(r) * cols + c];
  return t;
}

/// One head's unfused forward (q: its N_q rows; k, v: the N_kv rows of its key/value head).
/// Writes O and lse; when P is given (N_q×N_kv), also the stored probabilities of every row
/// (entries past a row's visible keys are left alone: every later loop stops there). A row
/// that sees no key gets O = 0, lse = −∞, as in the float64 reference.
void forward_head(const Problem& p, const float* q, const float* k, const float* v, float* O,
                  float* lse, float* P, SumOrder order) {
  const bool rev = order == SumOrder::Descending;
  const int N = p.len_q, Nk = p.len_kv, d = p.head_dim;
  const DType t = p.dtype;
  const float scale = p.softmax_scale();
  const std::vector<float> Kt = transpose(k, Nk, d);
#pragma omp parallel
  {
    std::vector<float> acc(Nk), row(P ? 0 : Nk), o(d);
#pragma omp for schedule(dynamic, 8)
    for (int i = 0; i < N; ++i) {
      const int visible = p.visible_keys(i);
      if (visible == 0) {
        std::fill(O + int64_t(i) * d, O + int64_t(i + 1) * d, 0.f);
        lse[i] = -std::numeric_limits<float>::infinity();
        continue;
      }
      float* Pi = P ? P + int64_t(i) * Nk : row.data();
      // S_i = scale·q_i·Kᵀ: acc_j = Σ_c q_ic·k_jc in order of c, then scaled and stored.
      std::fill(acc.begin(), acc.begin() + visible, 0.f);
      for (int n = 0; n < d; ++n) {
        const int c = rev ? d - 1 - n : n;
        fma_axpy(visible, q[int64_t(i) * d + c], &Kt[size_t(c) * Nk], acc.data());
      }
      float m = -std::numeric_limits<float>::infinity();
      for (int j = 0; j < visible; ++j) {
        acc[j] = round_to(t, scale * acc[j]);  // S stored
        m = std::max(m, acc[j]);
      }
      // Safe softmax: e = exp(S − m), l = Σ e in order, P = e / l stored.
      float l = 0.f;
      for (int j = 0; j < visible; ++j) acc[j] = std::exp(acc[j] - m);
      for (int n = 0; n < visible; ++n) l += acc[rev ? visible - 1 - n : n];
      for (int j = 0; j < visible; ++j) Pi[j] = round_to(t, acc[j] / l);
      lse[i] = m + std::log(l);
      // O_i = Σ_j P_ij·v_j in order of j, stored.
      std::fill(o.begin(), o.end(), 0.f);
      for (int n = 0; n < visible; ++n) {
        const int j = rev ? visible - 1 - n : n;
        fma_axpy(d, Pi[j], v + int64_t(j) * d, o.data());
      }
      for (int c = 0; c < d; ++c) O[int64_t(i) * d + c] = round_to(t, o[c]);
    }
  }
}

/// One head's unfused backward from the stored P and O of forward_head. dQ is stored; dK and
/// dV (N_kv·d) are this query head's float32 sums, *added* to what they hold, so that the
/// query heads of a group add up before the caller stores (rounds) the total.
void backward_head(const Problem& p, const float* q, const float* k, const float* v,
                   const float* dout, const float* O, const float* P, float* dQ, float* dK,
                   float* dV, SumOrder order) {
  const bool rev = order == SumOrder::Descending;
  const int N = p.len_q, Nk = p.len_kv, d = p.head_dim;
  const DType t = p.dtype;
  const float scale = p.softmax_scale();
  const std::vector<float> Vt = transpose(v, Nk, d);
  std::vector<float> dS(size_t(N) * Nk);
  // Rows: D_i = rowsum(dO∘O) (float32), dP_i = dO_i·Vᵀ (stored), dS_i = P_i∘(dP_i − D_i)
  // (stored), dQ_i = scale·dS_i·K (stored).
#pragma omp parallel
  {
    std::vector<float> acc(Nk), dq(d);
#pragma omp for schedule(dynamic, 8)
    for (int i = 0; i < N; ++i) {
      const int visible = p.visible_keys(i);
      const float* do_i = dout + int64_t(i) * d;
      const float* o_i = O + int64_t(i) * d;
      float D = 0.f;
      for (int n = 0; n < d; ++n) {
        const int c = rev ? d - 1 - n : n;
        D = std::fma(do_i[c], o_i[c], D);
      }
      std::fill(acc.begin(), acc.begin() + visible, 0.f);
      for (int n = 0; n < d; ++n) {
        const int c = rev ? d - 1 - n : n;
        fma_axpy(visible, do_i[c], &Vt[size_t(c) * Nk], acc.data());
      }
      const float* Pi = P + int64_t(i) * Nk;
      float* dSi = &dS[size_t(i) * Nk];
      for (int j = 0; j < visible; ++j) {
        const float dP = round_to(t, acc[j]);
        dSi[j] = round_to(t, Pi[j] * (dP - D));
      }
      std::fill(dq.begin(), dq.end(), 0.f);
      for (int n = 0; n < visible; ++n) {
        const int j = rev ? visible - 1 - n : n;
        fma_axpy(d, dSi[j], k + int64_t(j) * d, dq.data());
      }
      for (int c = 0; c < d; ++c) dQ[int64_t(i) * d + c] = round_to(t, scale * dq[c]);
    }
  }
  // Columns: dV_j = Σ_i P_ij·dO_i and dK_j = scale·Σ_i dS_ij·q_i, each summed in order of i,
  // for a chunk of keys at a time (their accumulators stay in cache while i runs).
  constexpr int kChunk = 32;
  const int chunks = (Nk + kChunk - 1) / kChunk;
#pragma omp parallel
  {
    std::vector<float> ak(size_t(kChunk) * d), av(size_t(kChunk) * d);
#pragma omp for schedule(dynamic, 1)
    for (int ch = 0; ch < chunks; ++ch) {
      const int j0 = ch * kChunk, j1 = std::min(Nk, j0 + kChunk);
      std::fill(ak.begin(), ak.end(), 0.f);
      std::fill(av.begin(), av.end(), 0.f);
      // The first query that sees key j0 (causal: j0 ≤ i + offset); the ones before see none
      // of this chunk.
      const int i0 = p.causal ? std::clamp(j0 - p.causal_offset(), 0, N) : 0;
      for (int n = 0; n < N - i0; ++n) {
        const int i = rev ? N - 1 - n : i0 + n;
        const int j_end = std::min(j1, p.visible_keys(i));
        for (int j = j0; j < j_end; ++j) {
          fma_axpy(d, P[int64_t(i) * Nk + j], dout + int64_t(i) * d, &av[size_t(j - j0) * d]);
          fma_axpy(d, dS[size_t(i) * Nk + j], q + int64_t(i) * d, &ak[size_t(j - j0) * d]);
        }
      }
      for (int j = j0; j < j1; ++j)
        for (int c = 0; c < d; ++c) {
          dV[int64_t(j) * d + c] += av[size_t(j - j0) * d + c];
          dK[int64_t(j) * d + c] += scale * ak[size_t(j - j0) * d + c];
        }
    }
  }
}

}  // namespace

void fma_axpy(int n, float a, const float* x, float* y) { fma_axpy_impl(n, a, x, y); }
float fma_dot(int n, const float* a, const float* b) { return fma_dot_impl(n, a, b); }

void round_in_place(DType t, std::vector<float>& x) {
  if (t == DType::Float32) return;
  for (float& f : x) f = round_to(t, f);
}

void round_inputs(DType t, AttentionInputs& in) {
  for (auto* x : {&in.Q, &in.K, &in.V, &in.dO}) round_in_place(t, *x);
}

double relative_l2(const float* got, const double* ref, size_t n) {
  double err2 = 0, ref2 = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::isinf(ref[i]) && double(got[i]) == ref[i]) continue;  // −∞: a row with no key
    if (!std::isfinite(got[i]) || std::isinf(ref[i])) return std::numeric_limits<double>::quiet_NaN();
    const double e = double(got[i]) - ref[i];
    err2 += e * e;
    ref2 += ref[i] * ref[i];
  }
  return ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
}

void unfused_forward_head(const Problem& p, const float* Q, const float* K, const float* V,
                          int64_t bh, float* O, float* lse, SumOrder order) {
  const int64_t head = bh * int64_t(p.len_q) * p.head_dim;
  const int64_t kv = p.kv_head(bh) * int64_t(p.len_kv) * p.head_dim;
  forward_head(p, Q + head, K + kv, V + kv, O, lse, nullptr, order);
}

namespace {
/// The forward and backward of query head bh, its dK and dV contributions added (unrounded)
/// to dK and dV (N_kv·d each).
void backward_head_sums(const Problem& p, const float* Q, const float* K, const float* V,
                        const float* dO, int64_t bh, float* O, float* lse, float* dQ, float* dK,
                        float* dV, SumOrder order) {
  const int64_t head = bh * int64_t(p.len_q) * p.head_dim;
  const int64_t kv = p.kv_head(bh) * int64_t(p.len_kv) * p.head_dim;
  std::vector<float> P(size_t(p.len_q) * p.len_kv);
  forward_head(p, Q + head, K + kv, V + kv, O, lse, P.data(), order);
  backward_head(p, Q + head, K + kv, V + kv, dO + head, O, P.data(), dQ, dK, dV, order);
}

/// Stores (rounds to the dtype) n float32 sums of dK and dV.
void store_sums(DType t, int64_t n, float* dK, float* dV) {
  for (int64_t x = 0; x < n; ++x) {
    dK[x] = round_to(t, dK[x]);
    dV[x] = round_to(t, dV[x]);
  }
}
}  // namespace

void unfused_backward_head(const Problem& p, const float* Q, const float* K, const float* V,
                           const float* dO, int64_t bh, float* O, float* lse, float* dQ,
                           float* dK, float* dV, SumOrder order) {
  const int64_t kv_n = int64_t(p.len_kv) * p.head_dim;
  std::fill(dK, dK + kv_n, 0.f);
  std::fill(dV, dV + kv_n, 0.f);
  backward_head_sums(p, Q, K, V, dO, bh, O, lse, dQ, dK, dV, order);
  store_sums(p.dtype, kv_n, dK, dV);
}

namespace {

ft::TensorErrors worst_of(const TensorErrors& a, const TensorErrors& b) {
  auto w = [](double x, double y) { return std::isnan(x) || std::isnan(y) ? NAN : std::max(x, y); };
  return {w(a.O, b.O), w(a.lse, b.lse), w(a.dQ, b.dQ), w(a.dK, b.dK), w(a.dV, b.dV)};
}

TensorErrors forward_error(const Problem& p, const AttentionInputs& in, const ReferenceTensors& ref,
                           SumOrder order) {
  const int64_t nd = int64_t(p.len_q) * p.head_dim;
  std::vector<float> O(size_t(p.elems())), lse(size_t(p.rows()));
  for (int64_t bh = 0; bh < p.heads_total(); ++bh)
    unfused_forward_head(p, in.Q.data(), in.K.data(), in.V.data(), bh, O.data() + bh * nd,
                         lse.data() + bh * p.len_q, order);
  TensorErrors e;
  e.O = relative_l2(O.data(), ref.O.data(), O.size());
  e.lse = relative_l2(lse.data(), ref.lse.data(), lse.size());
  return e;
}

TensorErrors backward_error(const Problem& p, const AttentionInputs& in,
                            const ReferenceTensors& ref, SumOrder order) {
  const int64_t nd = int64_t(p.len_q) * p.head_dim, kv_nd = int64_t(p.len_kv) * p.head_dim;
  const size_t n = size_t(p.elems()), kv_n = size_t(p.kv_elems());
  std::vector<float> O(n), lse(size_t(p.rows())), dQ(n), dK(kv_n, 0.f), dV(kv_n, 0.f);
  for (int64_t bh = 0; bh < p.heads_total(); ++bh) {
    const int64_t kv = p.kv_head(bh) * kv_nd;
    backward_head_sums(p, in.Q.data(), in.K.data(), in.V.data(), in.dO.data(), bh,
                       O.data() + bh * nd, lse.data() + bh * p.len_q, dQ.data() + bh * nd,
                       dK.data() + kv, dV.data() + kv, order);
  }
  // A key/value head's gradients are stored once, after its group's query heads added up.
  store_sums(p.dtype, p.kv_elems(), dK.data(), dV.data());
  TensorErrors e;
  e.O = relative_l2(O.data(), ref.O.data(), n);
  e.lse = relative_l2(lse.data(), ref.lse.data(), lse.size());
  e.dQ = relative_l2(dQ.data(), ref.dQ.data(), n);
  e.dK = relative_l2(dK.data(), ref.dK.data(), kv_n);
  e.dV = relative_l2(dV.data(), ref.dV.data(), kv_n);
  return e;
}

}  // namespace

TensorErrors unfused_forward_error(const Problem& p, const AttentionInputs& in,
                                   const ReferenceTensors& ref) {
  return worst_of(forward_error(p, in, ref, SumOrder::Ascending),
                  forward_error(p, in, ref, SumOrder::Descending));
}

TensorErrors unfused_backward_error(const Problem& p, const AttentionInputs& in,
                                    const ReferenceTensors& ref) {
  return worst_of(backward_error(p, in, ref, SumOrder::Ascending),
                  backward_error(p, in, ref, SumOrder::Descending));
}

StoredOError stored_o_error(const Problem& p, const AttentionInputs& in,
                            const ReferenceTensors& ref) {
  if (p.dtype == DType::Float32 || ref.dQ.empty()) return {};
  const int N = p.len_q, d = p.head_dim;
  const int64_t head_elems = int64_t(N) * d, kv_elems = int64_t(p.len_kv) * d;
  const double scale = p.softmax_scale();
  std::vector<double> ddq(size_t(p.elems()), 0.0), ddk(size_t(p.kv_elems()), 0.0);
  // One thread per key/value head, its group's query heads in turn, so that no two threads
  // add into one ΔdK.
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t g = 0; g < p.kv_heads_total(); ++g)
  for (int64_t h = g * p.group(); h < (g + 1) * p.group(); ++h) {
    const float* q = in.Q.data() + h * head_elems;
    const float* k = in.K.data() + g * kv_elems;
    const float* dout = in.dO.data() + h * head_elems;
    const double* o = ref.O.data() + h * head_elems;
    const double* lse = ref.lse.data() + h * N;
    double* dq = ddq.data() + h * head_elems;
    double* dk = ddk.data() + g * kv_elems;
    for (int i = 0; i < N; ++i) {
      double dD = 0;  // ΔD_i: what O's rounding does to D_i
      for (int c = 0; c < d; ++c) {
        const double oc = o[int64_t(i) * d + c];
        dD += double(dout[int64_t(i) * d + c]) * (double(round_to(p.dtype, float(oc))) - oc);
      }
      if (dD == 0) continue;
      const int visible = p.visible_keys(i);
      for (int j = 0; j < visible; ++j) {
        double s = 0;
        for (int c = 0; c < d; ++c) s += double(q[int64_t(i) * d + c]) * k[int64_t(j) * d + c];
        const double w = -scale * std::exp(scale * s - lse[i]) * dD;  // −scale·P_ij·ΔD_i
        for (int c = 0; c < d; ++c) {
          dq[int64_t(i) * d + c] += w * k[int64_t(j) * d + c];
          dk[int64_t(j) * d + c] += w * q[int64_t(i) * d + c];
        }
      }
    }
  }
  const auto rel = [](const std::vector<double>& delta, const std::vector<double>& r) {
    double num = 0, den = 0;
    for (size_t x = 0; x < r.size(); ++x) num += delta[x] * delta[x], den += r[x] * r[x];
    return den > 0 ? std::sqrt(num / den) : 0.0;
  };
  return {rel(ddq, ref.dQ), rel(ddk, ref.dK)};
}

// ---- The reference cache ----------------------------------------------------------------------

AttentionInputs reference_inputs(const Problem& p, InputKind kind, uint64_t seed) {
  AttentionInputs in = make_inputs(p, kind, seed);
  round_inputs(p.dtype, in);
  return in;
}

namespace {

/// FNV-1a, 64 bits: a checksum of the cached data and the hash behind file names.
struct Fnv {
  uint64_t h = 0xcbf29ce484222325ull;
  void add(const void* data, size_t n) {
    const auto* b = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  }
  template <class T>
  void add(const std::vector<T>& v) { add(v.data(), v.size() * sizeof(T)); }
};

std::string hex64(uint64_t x) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)x);
  return buf;
}

/// A hash of what this build's input generator, float64 reference and baseline compute, on
/// small problems of every dtype, kind and mask: a change to any of them changes the key of
/// every cached file, so that no file written by an older build is ever taken for current.
std::string compute_fingerprint() {
  Fnv f;
  for (DType t : {DType::Float32, DType::BFloat16, DType::Float16})
    for (InputKind kind : {InputKind::Uniform, InputKind::LargeScores})
      for (bool causal : {false, true}) {
        // N = 8: one OpenMP chunk of rows (schedule(dynamic, 8)), so that the float64
        // backward's per-thread sums of dK and dV add up in one order: the same bits in
        // every process, which a fingerprint needs.
        const Problem p = make_problem(1, 2, 8, 8, causal, t);
        const AttentionInputs in = reference_inputs(p, kind, 12345);
        const size_t n = size_t(p.elems());
        std::vector<double> O(n), lse(size_t(p.rows())), dQ(n), dK(n), dV(n);
        reference_forward(p, in.Q.data(), in.K.data(), in.V.data(), O.data(), lse.data());
        reference_backward(p, in.Q.data(), in.K.data(), in.V.data(), in.dO.data(), dQ.data(),
                           dK.data(), dV.data());
        for (const auto* x : {&in.Q, &in.K, &in.V, &in.dO}) f.add(*x);
        for (const auto* x : {&O, &lse, &dQ, &dK, &dV}) f.add(*x);
        std::vector<float> o(n), l(size_t(p.rows())), gq(n), gk(n), gv(n);
        for (SumOrder order : {SumOrder::Ascending, SumOrder::Descending})
          for (int64_t bh = 0; bh < p.heads_total(); ++bh) {
            const int64_t off = bh * p.len_q * p.head_dim;
            unfused_backward_head(p, in.Q.data(), in.K.data(), in.V.data(), in.dO.data(), bh,
                                  o.data() + off, l.data() + bh * p.len_q, gq.data() + off,
                                  gk.data() + off, gv.data() + off, order);
            for (const auto* x : {&o, &l, &gq, &gk, &gv}) f.add(*x);
          }
      }
  // The sources themselves, hashed by CMake (common/CMakeLists.txt): a change that shows
  // only past N = 8 (the blocked sums of a larger head) still makes every cached file stale.
#ifdef FT_REFERENCE_SOURCES_SHA256
  const std::string sources = FT_REFERENCE_SOURCES_SHA256;
  f.add(sources.data(), sources.size());
#endif
  return hex64(f.h);
}

const std::string& code_fingerprint() {
  static const std::string fp = compute_fingerprint();
  return fp;
}

constexpr char kMagic[8] = {'F', 'T', 'R', 'E', 'F', '\x01', '\n', '\0'};

std::string key_of(const Problem& p, InputKind kind, uint64_t seed, const char* part) {
  char scale[32];
  std::snprintf(scale, sizeof scale, "%a", double(p.scale));
  return std::string("flashtut reference v1 code=") + code_fingerprint() +
         " B=" + std::to_string(p.batch) + " Hq=" + std::to_string(p.heads_q) +
         " Hkv=" + std::to_string(p.heads_kv) + " Nq=" + std::to_string(p.len_q) +
         " Nkv=" + std::to_string(p.len_kv) + " d=" + std::to_string(p.head_dim) +
         " causal=" + (p.causal ? "1" : "0") + " align=" + causal_align_name(p.align) + " scale=" + scale + " dtype=" + dtype_name(p.dtype) +
         " kind=" + std::to_string(int(kind)) + " seed=" + std::to_string(seed) + " part=" + part;
}

std::mutex g_mutex;
ReferenceCacheStats g_stats;
std::map<std::string, std::unique_ptr<Reference>> g_memory;  // key → result, this process

/// One cached part: arrays of doubles and one baseline error per array.
struct Part {
  std::vector<std::vector<double>> arrays;
  std::vector<double> baseline;
};

std::filesystem::path file_of(const std::string& dir, const std::string& key) {
  Fnv f;
  f.add(key.data(), key.size());
  return std::filesystem::path(dir) / ("ref-" + hex64(f.h) + ".bin");
}

void put_u64(std::string& out, uint64_t x) { out.append(reinterpret_cast<const char*>(&x), 8); }
void put_f64(std::string& out, double x) { out.append(reinterpret_cast<const char*>(&x), 8); }

/// Reads a part whose key and array sizes must be exactly `key` and `sizes`; false (and the
/// part untouched) for a missing file, and for any mismatch: wrong magic, another key (a
/// hash collision, an older build), other sizes, a short or long file, a bad checksum.
bool read_part(const std::filesystem::path& path, const std::string& key,
               const std::vector<size_t>& sizes, Part* part, bool* rejected) {
  *rejected = false;
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  const std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  *rejected = true;
  size_t pos = 0;
  auto take = [&](void* dst, size_t n) {
    if (data.size() - pos < n) return false;
    std::memcpy(dst, data.data() + pos, n);
    pos += n;
    return true;
  };
  char magic[8];
  uint64_t key_len = 0, n_arrays = 0, checksum = 0;
  if (!take(magic, 8) || std::memcmp(magic, kMagic, 8) != 0) return false;
  if (!take(&key_len, 8) || key_len != key.size() || data.size() - pos < key_len) return false;
  if (data.compare(pos, key_len, key) != 0) return false;
  pos += key_len;
  if (!take(&n_arrays, 8) || n_arrays != sizes.size()) return false;
  Part got;
  size_t payload = 0;
  for (size_t a = 0; a < sizes.size(); ++a) {
    uint64_t count = 0;
    double base = 0;
    if (!take(&count, 8) || count != sizes[a] || !take(&base, 8)) return false;
    got.baseline.push_back(base);
    payload += sizes[a] * sizeof(double);
  }
  if (!take(&checksum, 8) || data.size() - pos != payload) return false;
  Fnv sum;
  sum.add(data.data() + pos, payload);
  if (sum.h != checksum) return false;
  for (size_t a = 0; a < sizes.size(); ++a) {
    got.arrays.emplace_back(sizes[a]);
    take(got.arrays.back().data(), sizes[a] * sizeof(double));
  }
  *part = std::move(got);
  *rejected = false;
  return true;
}

/// Writes a part to a temporary file in the directory, then renames it into place. Returns
/// false on any failure (the test goes on with the result in memory).
bool write_part(const std::filesystem::path& path, const std::string& key, const Part& part) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  std::string head(kMagic, 8);
  put_u64(head, key.size());
  head += key;
  put_u64(head, part.arrays.size());
  Fnv sum;
  for (size_t a = 0; a < part.arrays.size(); ++a) {
    put_u64(head, part.arrays[a].size());
    put_f64(head, part.baseline[a]);
    sum.add(part.arrays[a]);
  }
  put_u64(head, sum.h);
  static std::atomic<int> counter{0};
  const std::filesystem::path tmp =
      path.string() + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter++);
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(head.data(), std::streamsize(head.size()));
    for (const auto& a : part.arrays)
      f.write(reinterpret_cast<const char*>(a.data()), std::streamsize(a.size() * sizeof(double)));
    f.close();
    if (!f) {
      std::filesystem::remove(tmp, ec);
      return false;
    }
  }
  std::filesystem::rename(tmp, path, ec);  // replaces an older file at once
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return false;
  }
  return true;
}

/// The part `key` from the directory, or computed by `compute` (and then written there).
/// An exclusive advisory lock (flock) on a file, held for the object's lifetime; no-op for an
/// empty path or when the file cannot be opened (the cache then works as before, unlocked).
class FileLock {
 public:
  explicit FileLock(const std::string& path) {
    if (path.empty()) return;
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    fd_ = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd_ >= 0 && ::flock(fd_, LOCK_EX) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~FileLock() {
    if (fd_ >= 0) {
      ::flock(fd_, LOCK_UN);
      ::close(fd_);
    }
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

Part load_or_compute(const std::string& dir, const std::string& key,
                     const std::vector<size_t>& sizes, Part (*compute)(const void*),
                     const void* ctx) {
  Part part;
  // Test processes run in parallel (ctest -j), and the variants of a chapter reach the same
  // shape at the same time: an exclusive lock per key makes the first compute and write it
  // while the others wait and then read it, instead of all computing it at once.
  FileLock lock(dir.empty() ? std::string() : file_of(dir, key).string() + ".lock");
  if (!dir.empty()) {
    bool rejected = false;
    if (read_part(file_of(dir, key), key, sizes, &part, &rejected)) {
      ++g_stats.loaded;
      return part;
    }
    g_stats.rejected += rejected;
  }
  part = compute(ctx);
  ++g_stats.computed;
  if (!dir.empty()) {
    if (write_part(file_of(dir, key), key, part)) {
      ++g_stats.written;
    } else {
      static bool warned = false;
      if (!warned)
        std::fprintf(stderr, "note: could not write the reference cache in %s; continuing\n",
                     dir.c_str());
      warned = true;
    }
  }
  return part;
}

struct Job {
  const Problem& p;
  InputKind kind;
  uint64_t seed;
  const Reference* forward;  // for the backward part: the forward's tensors
};

Part compute_forward(const void* ctx) {
  const Job& j = *static_cast<const Job*>(ctx);
  const AttentionInputs in = reference_inputs(j.p, j.kind, j.seed);
  ReferenceTensors r;
  r.O.resize(size_t(j.p.elems()));
  r.lse.resize(size_t(j.p.rows()));
  reference_forward(j.p, in.Q.data(), in.K.data(), in.V.data(), r.O.data(), r.lse.data());
  const TensorErrors e = unfused_forward_error(j.p, in, r);
  Part part;
  part.arrays = {std::move(r.O), std::move(r.lse)};
  part.baseline = {e.O, e.lse};
  return part;
}

Part compute_backward(const void* ctx) {
  const Job& j = *static_cast<const Job*>(ctx);
  const AttentionInputs in = reference_inputs(j.p, j.kind, j.seed);
  ReferenceTensors r;
  r.O = j.forward->tensors.O;
  r.lse = j.forward->tensors.lse;
  r.dQ.resize(size_t(j.p.elems()));
  for (auto* x : {&r.dK, &r.dV}) x->resize(size_t(j.p.kv_elems()));
  reference_backward(j.p, in.Q.data(), in.K.data(), in.V.data(), in.dO.data(), r.dQ.data(),
                     r.dK.data(), r.dV.data());
  const TensorErrors e = unfused_backward_error(j.p, in, r);
  Part part;
  part.arrays = {std::move(r.dQ), std::move(r.dK), std::move(r.dV)};
  part.baseline = {e.dQ, e.dK, e.dV};
  return part;
}

const Reference& forward_reference(const Problem& p, InputKind kind, uint64_t seed,
                                   const std::string& dir) {
  const std::string key = key_of(p, kind, seed, "forward");
  auto it = g_memory.find(key);
  if (it != g_memory.end()) return *it->second;
  const Job job{p, kind, seed, nullptr};
  Part part = load_or_compute(dir, key, {size_t(p.elems()), size_t(p.rows())}, compute_forward, &job);
  auto r = std::make_unique<Reference>();
  r->tensors.O = std::move(part.arrays[0]);
  r->tensors.lse = std::move(part.arrays[1]);
  r->baseline.O = part.baseline[0];
  r->baseline.lse = part.baseline[1];
  return *g_memory.emplace(key, std::move(r)).first->second;
}

}  // namespace

const Reference& cached_reference(const Problem& p, InputKind kind, uint64_t seed, bool backward,
                                  const std::string& cache_dir) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const Reference& fwd = forward_reference(p, kind, seed, cache_dir);
  if (!backward) return fwd;
  const std::string key = key_of(p, kind, seed, "backward");
  auto it = g_memory.find(key);
  if (it != g_memory.end()) return *it->second;
  const Job job{p, kind, seed, &fwd};
  const size_t n = size_t(p.elems()), kv_n = size_t(p.kv_elems());
  Part part = load_or_compute(cache_dir, key, {n, kv_n, kv_n}, compute_backward, &job);
  auto r = std::make_unique<Reference>(fwd);
  r->tensors.dQ = std::move(part.arrays[0]);
  r->tensors.dK = std::move(part.arrays[1]);
  r->tensors.dV = std::move(part.arrays[2]);
  r->baseline.dQ = part.baseline[0];
  r->baseline.dK = part.baseline[1];
  r->baseline.dV = part.baseline[2];
  return *g_memory.emplace(key, std::move(r)).first->second;
}

const Reference& cached_reference(const Problem& p, InputKind kind, uint64_t seed, bool backward) {
  const char* dir = std::getenv(kReferenceCacheEnv);
  return cached_reference(p, kind, seed, backward, dir ? dir : "");
}

std::string reference_code_fingerprint() { return compute_fingerprint(); }

ReferenceCacheStats reference_cache_stats() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_stats;
}

void clear_reference_memory_cache() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_memory.clear();
}

}  // namespace ft
