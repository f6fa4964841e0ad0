/// @file naive.cu
/// @brief Chapter 01: attention in three kernels, the plainest way to write it.
///
///   S = scale·Q·Kᵀ   qk_naive_kernel       one thread per element of S (N×N per head)
///   P = softmax(S)    softmax_naive_kernel  one thread per row of S, in place: S becomes P
///   O = P·V           pv_naive_kernel       one thread per element of O
///
/// Every thread fetches its operands straight from device memory and shares nothing with
/// its neighbours. The N×N grid (the workspace) is written once, read three times by the
/// softmax, written again as P and read once more by the last kernel: that traffic is
/// what the rest of the tutorial removes.
#include <algorithm>
#include <climits>
#include <cmath>
#include <functional>

#include "01_naive/naive.hpp"
#include "harness/registry.hpp"
#include "core/check.cuh"
#include "harness/table.hpp"

namespace ch01 {
namespace {

// Threads per block: a multiple of the 32-thread warp, and 8 blocks of 256 fill the 2048
// thread slots of an SM exactly, so the block size never limits how many threads run.
constexpr int kThreads = 256;

/// S[bh, i, j] = scale · Σ_c Q[bh, i, c] · K[bh, j, c], one thread per element of S,
/// numbered by its flat index into the B·H·N·N grid (int64: the grid passes 2^31 elements).
__global__ void qk_naive_kernel(const float* Q, const float* K, float* S, int N, int d,
                                float scale, int64_t grid_elems) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= grid_elems) return;
  const int64_t row = idx / N;  // query row over all heads: bh·N + i
  const int64_t j = idx % N;    // key
  const int64_t bh = row / N;   // which (batch, head)
  const float* q = Q + row * d;           // query i of head bh
  const float* k = K + (bh * N + j) * d;  // key j of the same head
  // Neighbouring threads (keys j, j+1) read k[c] d floats apart: one load instruction of a
  // warp touches 32 different memory sectors. q[c] is the same address for the whole warp.
  float acc = 0.f;
  for (int c = 0; c < d; ++c) acc += q[c] * k[c];
  S[idx] = scale * acc;
}

/// Safe softmax of each row of S, in place, one thread per row, three passes over the row:
/// the maximum m, the sum l of exp(s - m), then P = exp(s - m) / l. Subtracting m keeps
/// every exp ≤ 1, so large scores cannot overflow. Causal: keys j > i get P = 0.
/// Also writes lse = m + log(l) = log Σ_j exp(s_j), what a backward pass needs.
__global__ void softmax_naive_kernel(float* S, float* lse, int N, bool causal, int64_t rows) {
  const int64_t row = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;  // bh·N + i
  if (row >= rows) return;
  float* s = S + row * N;
  const int i = int(row % N);
  const int visible = causal ? i + 1 : N;  // key j is visible to query i iff j <= i
  // Neighbouring threads own neighbouring rows, N floats apart: every load of a warp is
  // 32 separate sectors (uncoalesced), and the row is fetched three times.
  float m = -INFINITY;
  for (int j = 0; j < visible; ++j) m = fmaxf(m, s[j]);
  float l = 0.f;
  for (int j = 0; j < visible; ++j) l += expf(s[j] - m);
  const float inv_l = 1.f / l;
  for (int j = 0; j < N; ++j) s[j] = j < visible ? expf(s[j] - m) * inv_l : 0.f;
  lse[row] = m + logf(l);
}

/// O[bh, i, c] = Σ_j P[bh, i, j] · V[bh, j, c], one thread per element of O. A warp holds
/// neighbouring columns c of the same row: P[i, j] is one address for all of them and
/// V[j, c..c+31] is one contiguous line, so these loads are coalesced.
__global__ void pv_naive_kernel(const float* P, const float* V, float* O, int N, int d,
                                int64_t elems) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= elems) return;
  const int64_t row = idx / d;  // bh·N + i
  const int c = int(idx % d);
  const int64_t bh = row / N;
  const float* p = P + row * N;            // row i of P
  const float* v = V + bh * N * d + c;     // column c of this head's V
  float acc = 0.f;
  for (int j = 0; j < N; ++j) acc += p[j] * v[int64_t(j) * d];
  O[idx] = acc;
}

/// Blocks of kThreads covering n threads; the grid's x dimension holds up to 2^31 - 1.
unsigned blocks_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks > INT_MAX)
    throw ft::Unsupported("chapter 01: " + std::to_string(n) + " threads exceed one grid");
  return unsigned(blocks);
}

void forward(const ft::Problem& p, const ft::ForwardArgs& a, cudaStream_t stream) {
  const int N = p.len_q, d = p.head_dim;
  float* S = static_cast<float*>(a.workspace);  // S, then P in place
  qk_naive_kernel<<<blocks_for(p.grid_elems()), kThreads, 0, stream>>>(
      a.Q, a.K, S, N, d, p.softmax_scale(), p.grid_elems());
  CUDA_CHECK_LAUNCH();
  softmax_naive_kernel<<<blocks_for(p.rows()), kThreads, 0, stream>>>(S, a.lse, N, p.causal,
                                                                       p.rows());
  CUDA_CHECK_LAUNCH();
  pv_naive_kernel<<<blocks_for(p.elems()), kThreads, 0, stream>>>(S, a.V, a.O, N, d, p.elems());
  CUDA_CHECK_LAUNCH();
}

/// The grid's bytes, after checking that the score kernel (a thread per score) fits one grid:
/// the C API then answers FT_WORKSPACE_ERROR for a problem the forward would refuse.
size_t workspace_bytes(const ft::Problem& p) {
  blocks_for(p.grid_elems());
  return p.grid_bytes();
}

// The softmax gives every row its own thread, so ft::resident_threads() rows (132 SMs × 2048
// thread slots on an H200) are walked at once, and their re-reads have to fit in L2 to be
// served from there.

}  // namespace

std::vector<ft::KernelTraffic> traffic(const ft::Problem& p) {
  using ft::kFloatBytes;
  const double BH = double(p.heads_total()), N = p.len_q, d = p.head_dim;
  const double grid = ft::matrix_bytes(BH * N, N);        // one N×N grid per head
  const double tensor = ft::matrix_bytes(BH * N, d);      // one of Q, K, V, O
  const double lse = ft::matrix_bytes(BH * N, 1);
  const double visible = BH * ft::visible_pairs(p) * kFloatBytes;  // unmasked part of the grid
  const double head = ft::matrix_bytes(N, d);             // one head's K (or V)
  const bool head_fits = ft::fits_l2(head);
  const double matmul_flops = p.forward_flops() / 2;     // papers' count, per product
  const std::string head_note = "a head's K/V (" + ft::format_bytes(head) +
                                (head_fits ? ") fits in L2, so re-reads of it are L2 hits"
                                           : ") does not fit in L2: read again per query row");

  ft::KernelTraffic qk;
  qk.kernel = "qk_naive_kernel";
  qk.read_bytes = BH * N * N * 2 * d * kFloatBytes;  // each S element: a row of Q and of K
  qk.write_bytes = grid;
  qk.dram_read_bytes = head_fits ? 2 * tensor : tensor + N * tensor;
  qk.dram_write_bytes = grid;
  qk.flops = matmul_flops;
  qk.note = "L1/L2 serve the 2·d-float re-reads; " + head_note + "; S (" +
            ft::format_bytes(grid) + ") goes to DRAM";

  // Rows walked at once (one per resident thread) times the bytes of a row: the data the
  // second and third passes re-read. It fits in L2 only for small problems.
  const bool rows_fit = ft::fits_l2(std::min(BH * N, ft::resident_threads()) * N * kFloatBytes);
  ft::KernelTraffic sm;
  sm.kernel = "softmax_naive_kernel";
  sm.read_bytes = 3 * visible;  // max, sum, normalize: each pass reads the visible entries
  sm.write_bytes = grid + lse;  // P (zeros where masked) and the log-sum-exp
  sm.dram_read_bytes = rows_fit ? visible : 3 * visible;
  sm.dram_write_bytes = grid + lse;
  sm.flops = 0;  // the papers count only the two matrix products
  sm.note = rows_fit ? "the rows in flight fit in L2: the 2nd and 3rd pass hit L2"
                     : "one row per thread: the rows in flight overflow L2, so all three "
                       "passes over the grid reach DRAM";

  ft::KernelTraffic pv;
  pv.kernel = "pv_naive_kernel";
  pv.read_bytes = BH * N * d * 2 * N * kFloatBytes;  // each O element: a row of P, a column of V
  pv.write_bytes = tensor;
  pv.dram_read_bytes = grid + (head_fits ? tensor : N * tensor);
  pv.dram_write_bytes = tensor;
  pv.flops = matmul_flops;
  pv.note = "P's row is shared by the warp (one address); " + head_note +
            "; P is read from DRAM once";
  return {qk, sm, pv};
}

const ft::ForwardImpl& naive() {
  static const ft::ForwardImpl impl{
      "01", "naive", "three kernels, the N×N grid in device memory", {}, workspace_bytes,
      forward, traffic};
  return impl;
}

std::vector<ft::ForwardImpl> forward_impls() { return {naive()}; }

}  // namespace ch01

FT_REGISTER(ch01) { ft::register_forward(ch01::naive(), /*headline=*/true, /*tour=*/true); }
