/// @file online_softmax.cu
/// @brief Chapter 03: attention with the online softmax between chapter 02's products.
///
///   S = scale·Q·Kᵀ   ch02::tiled_matmul
///   P = softmax(S)    online_softmax_kernel: ONE read for max and sum together, one
///                     more to normalize (chapter 02 needed a separate read for the max)
///   O = P·V           ch02::tiled_matmul
#include <algorithm>
#include <climits>
#include <cmath>
#include <functional>
#include <string>

#include "02_tiled/tiled.hpp"
#include "02_tiled/tiled_matmul.cuh"
#include "03_online_softmax/online_softmax.hpp"
#include "harness/registry.hpp"
#include "core/check.cuh"
#include "cuda_core/online_softmax.cuh"
#include "cuda_core/reduce.cuh"
#include "harness/table.hpp"

namespace ch03 {
namespace {

/// Softmax of one row per block with the online update: each thread folds its elements
/// into a running (m, l) in ONE read, the block merges the 256 states, and a second read
/// writes P. Scores are taken to base 2 (x = s·log2 e) so every exponential is one exp2.
__global__ void __launch_bounds__(ch02::kSoftmaxThreads)
    online_softmax_kernel(const float* in, float* out, float* lse, int cols, bool causal) {
  constexpr int kThreads = ch02::kSoftmaxThreads;
  __shared__ ft::OnlineSoftmax scratch[ft::kWarpSize];  // one state per warp
  const int64_t row = blockIdx.x;
  const float* x = in + row * cols;
  float* y = out + row * cols;
  const int visible = causal ? int(row % cols) + 1 : cols;  // key j visible to query i iff j <= i

  // Read 1: max and sum together. A larger score rescales the sum collected so far.
  // x·log2 e is rounded once, here and in read 2 alike (__fmul_rn: never fused into the
  // subtraction that follows), so the entries written are exactly the ones summed and
  // every row of P sums to 1 within a few roundings. (An fmaf in read 2 alone would shift
  // each exponent by up to half an ulp of |x·log2 e|: at scores of 1e3 that is 6e-5, and
  // the row sums drift by as much, which chapter 05's backward turns into 6–20× the error
  // of an unfused float32 computation; chapter 05's README measures it.)
  ft::OnlineSoftmax s = ft::online_softmax_empty();
  for (int j = threadIdx.x; j < visible; j += kThreads) ft::online_push(s, __fmul_rn(x[j], ft::kLog2e));
  s = ft::block_merge(s, scratch);  // the 256 partial states, merged in a tree

  // Read 2: normalize. In place is safe: each element is read, then written, by the same
  // thread, after the merge.
  const float base = ft::online_exp_base(s.m);
  const float inv_l = 1.f / s.l;
  for (int j = threadIdx.x; j < cols; j += kThreads)
    y[j] = j < visible ? exp2f(__fmul_rn(x[j], ft::kLog2e) - base) * inv_l : 0.f;
  if (lse != nullptr && threadIdx.x == 0) lse[row] = ft::online_lse(s);
}

void forward(const ft::Problem& p, const ft::ForwardArgs& a, cudaStream_t stream) {
  const int N = p.len_q, d = p.head_dim;
  const int64_t BH = p.heads_total();
  const int64_t head = int64_t(N) * d;  // elements of one head's Q, K, V or O
  const int64_t grid = int64_t(N) * N;  // elements of one head's S or P
  float* S = static_cast<float*>(a.workspace);
  ch02::tiled_matmul(false, true, N, N, d, p.softmax_scale(), a.Q, head, a.K, head, S, grid,
                     BH, stream);
  attention_softmax(p, S, a.lse, stream);
  ch02::tiled_matmul(false, false, N, d, N, 1.f, S, grid, a.V, head, a.O, head, BH, stream);
}

size_t workspace_bytes(const ft::Problem& p) { return p.grid_bytes(); }

}  // namespace

void online_softmax_rows(const float* in, float* out, float* lse, int64_t rows, int cols,
                         bool causal, cudaStream_t stream) {
  if (rows < 0 || cols < 1)
    throw ft::Unsupported("online_softmax_rows: need rows >= 0 and cols >= 1");
  if (rows == 0) return;
  if (rows > INT_MAX)
    throw ft::Unsupported("online_softmax_rows: " + std::to_string(rows) + " rows exceed one grid");
  online_softmax_kernel<<<unsigned(rows), ch02::kSoftmaxThreads, 0, stream>>>(in, out, lse, cols,
                                                                              causal);
  CUDA_CHECK_LAUNCH();
}

void attention_softmax(const ft::Problem& p, float* S, float* lse, cudaStream_t stream) {
  online_softmax_rows(S, S, lse, p.rows(), p.len_q, p.causal, stream);
}

ft::KernelTraffic attention_softmax_traffic(const ft::Problem& p) {
  using ft::kFloatBytes;
  const double BH = double(p.heads_total()), N = p.len_q;
  const double grid = ft::matrix_bytes(BH * N, N);
  const double visible = BH * ft::visible_pairs(p) * kFloatBytes;
  // Same residency as chapter 02's softmax (one 256-thread block per row): the rows in
  // flight must stay in L2 for the normalize pass to find them there.
  const double in_flight = std::min(BH * N, ch02::softmax_wave_rows()) * N * kFloatBytes;
  const bool rows_fit = ft::fits_l2(in_flight);
  ft::KernelTraffic t;
  t.kernel = "online_softmax_kernel";
  t.read_bytes = 2 * visible;  // one read for max and sum together, one to normalize
  t.write_bytes = grid + ft::matrix_bytes(BH * N, 1);  // P in full, and lse
  t.dram_read_bytes = rows_fit ? visible : 2 * visible;
  t.dram_write_bytes = t.write_bytes;
  t.flops = 0;  // the papers count only the matrix products
  t.note = "rows in flight: " + ft::format_bytes(in_flight) +
           (rows_fit ? ", they fit in L2: the normalize pass hits L2, one DRAM read"
                     : ", more than L2 holds: both reads reach DRAM");
  return t;
}

std::vector<ft::KernelTraffic> traffic(const ft::Problem& p) {
  // Chapter 02's ledger with its softmax line replaced: the products are unchanged.
  std::vector<ft::KernelTraffic> kernels = ch02::traffic(p);
  kernels[1] = attention_softmax_traffic(p);
  return kernels;
}

const ft::ForwardImpl& online() {
  static const ft::ForwardImpl impl{"03",
                                    "online",
                                    "online softmax: max and sum in one read",
                                    {},
                                    workspace_bytes,
                                    forward,
                                    traffic};
  return impl;
}

std::vector<ft::ForwardImpl> forward_impls() { return {online()}; }

}  // namespace ch03

FT_REGISTER(ch03) { ft::register_forward(ch03::online(), /*headline=*/true, /*tour=*/true); }
