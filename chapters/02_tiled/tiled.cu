/// @file tiled.cu
/// @brief Chapter 02: the three passes of chapter 01, each made to use the GPU well.
///
///   S = scale·Q·Kᵀ   tiled_matmul (trans_b)   64×64 tiles staged in shared memory
///   P = softmax(S)    softmax_rows_kernel      a block of 256 threads per row
///   O = P·V           tiled_matmul             the same kernel
///
/// That is variant `tiled`. Variant `smem_tiles` runs the same passes with the products'
/// first step only (smem_tiles_matmul: 16×16 tiles in shared memory, one output element a
/// thread), so that the two show what the register micro-tiles add.
///
/// The grid still goes through device memory: that is chapter 03's and 04's business.
#include <algorithm>
#include <climits>
#include <cmath>
#include <functional>
#include <string>

#include "02_tiled/tiled.hpp"
#include "02_tiled/tiled_matmul.cuh"
#include "harness/registry.hpp"
#include "core/check.cuh"
#include "cuda_core/reduce.cuh"
#include "harness/table.hpp"

namespace ch02 {
namespace {

/// Safe softmax of one row per block. The block's threads stride over the row together,
/// so a warp reads 32 consecutive floats (one 128-byte line) per load: coalesced. The row
/// maximum and sum are combined across the block with warp shuffles and one value per warp
/// in shared memory (common/cuda_core/reduce.cuh). Still three passes over the row.
__global__ void __launch_bounds__(kSoftmaxThreads)
    softmax_rows_kernel(const float* in, float* out, float* lse, int cols, bool causal) {
  __shared__ float scratch[ft::kWarpSize];  // one partial result per warp
  const int64_t row = blockIdx.x;
  const float* x = in + row * cols;
  float* y = out + row * cols;
  const int visible = causal ? int(row % cols) + 1 : cols;  // key j visible to query i iff j <= i

  float m = -INFINITY;  // pass 1: the row maximum
  for (int j = threadIdx.x; j < visible; j += kSoftmaxThreads) m = fmaxf(m, x[j]);
  m = ft::block_max(m, scratch);

  float l = 0.f;  // pass 2: the sum of exp(x - m)
  for (int j = threadIdx.x; j < visible; j += kSoftmaxThreads) l += expf(x[j] - m);
  l = ft::block_sum(l, scratch);

  // Pass 3: normalize. In place is safe: each element is read and then written by the same
  // thread, and block_sum returned only after every thread had finished pass 2.
  const float inv_l = 1.f / l;
  for (int j = threadIdx.x; j < cols; j += kSoftmaxThreads)
    y[j] = j < visible ? expf(x[j] - m) * inv_l : 0.f;
  if (lse != nullptr && threadIdx.x == 0) lse[row] = m + logf(l);
}

/// tiled_matmul or smem_tiles_matmul (the same arguments).
using MatmulFn = void (*)(bool, bool, int, int, int, float, const float*, int64_t,
                          const float*, int64_t, float*, int64_t, int64_t, cudaStream_t);
/// tiled_matmul_traffic or smem_tiles_matmul_traffic.
using MatmulTrafficFn = ft::KernelTraffic (*)(const char*, int, int, int, int64_t, bool);

template <MatmulFn kMatmul>
void forward(const ft::Problem& p, const ft::ForwardArgs& a, cudaStream_t stream) {
  const int N = p.len_q, d = p.head_dim;
  const int64_t BH = p.heads_total();
  const int64_t head = int64_t(N) * d;  // elements of one head's Q, K, V or O
  const int64_t grid = int64_t(N) * N;  // elements of one head's S or P
  float* S = static_cast<float*>(a.workspace);
  // S = scale·Q·Kᵀ: op(B) = Kᵀ, so K (N×d) is passed with trans_b.
  kMatmul(false, true, N, N, d, p.softmax_scale(), a.Q, head, a.K, head, S, grid, BH, stream);
  softmax_rows(S, S, a.lse, p.rows(), N, p.causal, stream);
  kMatmul(false, false, N, d, N, 1.f, S, grid, a.V, head, a.O, head, BH, stream);
}

size_t workspace_bytes(const ft::Problem& p) { return p.grid_bytes(); }

/// The ledger of either variant: its two products' lines around the softmax's.
template <MatmulTrafficFn kMatmulTraffic>
std::vector<ft::KernelTraffic> passes_traffic(const ft::Problem& p) {
  using ft::kFloatBytes;
  const double BH = double(p.heads_total()), N = p.len_q;
  const double grid = ft::matrix_bytes(BH * N, N);
  const double lse = ft::matrix_bytes(BH * N, 1);
  const double visible = BH * ft::visible_pairs(p) * kFloatBytes;
  // Both products re-read one head's K (or V) across a whole row of tiles; that, and the
  // panel of Q (or P) the neighbouring blocks share, is what has to stay in L2.
  const bool head_fits = ft::fits_l2(ft::matrix_bytes(N, p.head_dim));
  const double matmul_flops = p.forward_flops() / 2;  // papers' count: halved when causal

  ft::KernelTraffic qk = kMatmulTraffic("S = scale·Q·Kᵀ", p.len_q, p.len_q, p.head_dim,
                                        p.heads_total(), head_fits);
  qk.flops = matmul_flops;

  // The rows in flight (one per block) must stay in L2 between the passes for the second
  // and third pass to be L2 hits.
  const double row_bytes = N * kFloatBytes;
  const double in_flight = std::min(BH * N, softmax_wave_rows()) * row_bytes;
  const bool rows_fit = ft::fits_l2(in_flight);
  ft::KernelTraffic sm;
  sm.kernel = "softmax_rows_kernel";
  sm.read_bytes = 3 * visible;  // max, sum, normalize
  sm.write_bytes = grid + lse;  // P in full (zeros where masked) and lse
  sm.dram_read_bytes = rows_fit ? visible : 3 * visible;
  sm.dram_write_bytes = grid + lse;
  sm.flops = 0;  // the papers count only the matrix products
  sm.note = std::string("rows in flight: ") + ft::format_bytes(in_flight) +
            (rows_fit ? ", they fit in L2: passes 2 and 3 hit L2, the grid is read from DRAM once"
                      : ", more than L2 holds: all three passes reach DRAM");

  ft::KernelTraffic pv = kMatmulTraffic("O = P·V", p.len_q, p.head_dim, p.len_q,
                                        p.heads_total(), head_fits);
  pv.flops = matmul_flops;
  return {qk, sm, pv};
}

}  // namespace

void softmax_rows(const float* in, float* out, float* lse, int64_t rows, int cols, bool causal,
                  cudaStream_t stream) {
  if (rows < 0 || cols < 1) throw ft::Unsupported("softmax_rows: need rows >= 0 and cols >= 1");
  if (rows == 0) return;
  if (rows > INT_MAX)
    throw ft::Unsupported("softmax_rows: " + std::to_string(rows) + " rows exceed one grid");
  softmax_rows_kernel<<<unsigned(rows), kSoftmaxThreads, 0, stream>>>(in, out, lse, cols, causal);
  CUDA_CHECK_LAUNCH();
}

std::vector<ft::KernelTraffic> traffic(const ft::Problem& p) {
  return passes_traffic<tiled_matmul_traffic>(p);
}

const ft::ForwardImpl& tiled() {
  static const ft::ForwardImpl impl{"02",
                                    "tiled",
                                    "shared-memory tiled products, a block per softmax row",
                                    {},
                                    workspace_bytes,
                                    forward<tiled_matmul>,
                                    traffic};
  return impl;
}

const ft::ForwardImpl& smem_tiles() {
  static const ft::ForwardImpl impl{"02",
                                    "smem_tiles",
                                    "16x16 smem tiles, an output a thread (no micro-tiles)",
                                    {},
                                    workspace_bytes,
                                    forward<smem_tiles_matmul>,
                                    passes_traffic<smem_tiles_matmul_traffic>};
  return impl;
}

std::vector<ft::ForwardImpl> forward_impls() { return {smem_tiles(), tiled()}; }

}  // namespace ch02

FT_REGISTER(ch02) {
  ft::register_forward(ch02::smem_tiles());
  ft::register_forward(ch02::tiled(), /*headline=*/true, /*tour=*/true);
}
