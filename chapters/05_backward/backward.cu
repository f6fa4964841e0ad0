/// @file backward.cu
/// @brief Chapter 05's implementations: the materializing baseline (P stored between the
/// passes), the flash backward (P recomputed) in two dQ strategies (and with two ways of
/// copying tiles), their memory ledgers and their C API.
#include "05_backward/backward.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>

#include "02_tiled/tiled_matmul.cuh"
#include "03_online_softmax/online_softmax.hpp"
#include "04_fused_forward/fused_forward.hpp"
#include "05_backward/flash_backward.cuh"
#include "harness/registry.hpp"
#include "core/check.cuh"
#include "device/dispatch.cuh"
#include "device/launch.cuh"
#include "cuda_core/reduce.cuh"

namespace ch05 {

// ---- Two small kernels: D, and dS for the baseline ------------------------------------------

constexpr int kSmallBlock = 256;  ///< threads of the two small kernels: 8 warps, a common size
constexpr int kRowsPerBlock = kSmallBlock / ft::kWarpSize;  ///< dot_dO_O: one warp per row

/// D_i = Σ_k dO_ik·O_ik, one warp per row: lanes stride over the row (coalesced), a warp
/// shuffle sums. D_i equals Σ_j P_ij·dP_ij (README) but costs N·d instead of N².
/// When dQ is given it also clears that row of dQ for the atomic adds that follow: it
/// visits every row anyway (FlashAttention-2's preprocessing kernel does the same).
__global__ void dot_dO_O(const float* O, const float* dO, float* D, float* dQ, int64_t rows,
                         int d) {
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / ft::kWarpSize;
  if (row >= rows) return;  // whole warps leave together, so the shuffle below stays full
  const int lane = threadIdx.x % ft::kWarpSize;
  float sum = 0.f;
  for (int k = lane; k < d; k += ft::kWarpSize) {
    sum += O[row * d + k] * dO[row * d + k];
    if (dQ) dQ[row * d + k] = 0.f;
  }
  sum = ft::warp_sum(sum);
  if (lane == 0) D[row] = sum;
}

/// The softmax's backward for the baseline: dS = P∘(dP − D), in place over dP. One block per
/// row (grid-stride over the B·H·N rows), threads stride over its N columns.
__global__ void softmax_backward(float* dP, const float* P, const float* D, int64_t rows, int N) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float D_row = D[row];
    float* dP_row = dP + row * N;
    const float* P_row = P + row * N;
    for (int c = threadIdx.x; c < N; c += blockDim.x) dP_row[c] = P_row[c] * (dP_row[c] - D_row);
  }
}

void compute_D(const float* O, const float* dO, float* D, int64_t rows, int d,
               cudaStream_t stream, float* zero_dQ) {
  if (rows == 0) return;
  const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  if (blocks > INT_MAX) throw ft::Unsupported("compute_D: too many rows for one launch");
  dot_dO_O<<<int(blocks), kSmallBlock, 0, stream>>>(O, dO, D, zero_dQ, rows, d);
  CUDA_CHECK_LAUNCH();
}

namespace {

// ---- The materializing baseline -------------------------------------------------------------

/// The workspace of materialize(): [P | dP | D].
struct MaterializeWorkspace {
  float *P, *dP, *D;
  MaterializeWorkspace(const ft::Problem& p, void* ws) {
    P = static_cast<float*>(ws);
    dP = P + p.grid_elems();
    D = dP + p.grid_elems();
  }
};

void materialize_forward_run(const ft::Problem& p, const ft::ForwardArgs& a, cudaStream_t st) {
  const int N = p.len_q, d = p.head_dim;
  const int64_t bh = p.heads_total(), nd = int64_t(N) * d, nn = int64_t(N) * N;
  float* P = MaterializeWorkspace(p, a.workspace).P;
  ch02::tiled_matmul(false, true, N, N, d, p.softmax_scale(), a.Q, nd, a.K, nd, P, nn, bh, st);
  // S → P in place (masked entries 0), and L: chapter 03's softmax, whose rows of P sum to
  // 1 within a few roundings (the backward's dS = P∘(dP − D) relies on it; README,
  // "Precision on large logits").
  ch03::attention_softmax(p, P, a.lse, st);
  ch02::tiled_matmul(false, false, N, d, N, 1.f, P, nn, a.V, nd, a.O, nd, bh, st);  // O = P·V
}

void materialize_backward_run(const ft::Problem& p, const ft::BackwardArgs& a, cudaStream_t st) {
  const int N = p.len_q, d = p.head_dim;
  const int64_t bh = p.heads_total(), nd = int64_t(N) * d, nn = int64_t(N) * N;
  const float scale = p.softmax_scale();
  const MaterializeWorkspace w(p, a.workspace);
  ch02::tiled_matmul(true, false, N, d, N, 1.f, w.P, nn, a.dO, nd, a.dV, nd, bh, st);  // dV = Pᵀ·dO
  ch02::tiled_matmul(false, true, N, N, d, 1.f, a.dO, nd, a.V, nd, w.dP, nn, bh, st);  // dP = dO·Vᵀ
  compute_D(a.O, a.dO, w.D, p.rows(), d, st);
  const int blocks = int(std::min<int64_t>(p.rows(), INT_MAX));
  softmax_backward<<<blocks, kSmallBlock, 0, st>>>(w.dP, w.P, w.D, p.rows(), N);  // dS over dP
  CUDA_CHECK_LAUNCH();
  const float* dS = w.dP;
  ch02::tiled_matmul(false, false, N, d, N, scale, dS, nn, a.K, nd, a.dQ, nd, bh, st);  // dQ
  ch02::tiled_matmul(true, false, N, d, N, scale, dS, nn, a.Q, nd, a.dK, nd, bh, st);   // dK
}

// ---- The flash backward ---------------------------------------------------------------------

// Tile shapes (flash_backward.cuh; the sizes in backward.hpp). Default: 64 queries × 64 keys
// for every d; at d = 128 that is all the shared memory allows (168.5 KB of the 227 KB a
// block may have).
template <int d>
using DefaultTiles = Tiles<d, kFlashBr, kFlashBc>;
// Wide keys: 128 keys per block where registers allow it (d ≤ 64): dK, dV grow to 64
// accumulators a thread and one block fits an SM, but each Q/dO tile loaded serves twice as
// many keys, and dQ takes half as many atomic adds. d = 128 keeps 64 keys (the registers
// and shared memory are full), so there the variant is the default kernel again: it still
// lists d = 128, because a chapter program only accepts a d that all its variants accept.
template <int d>
using WideKeyTiles = Tiles<d, kFlashBr, d <= 64 ? kWideKeysBc : kFlashBc>;

enum class DqStrategy { kAtomic, kSeparatePass };

/// Blocks = tiles × heads on grid.x (grid.y would stop at 65535 heads).
int grid_size(const ft::Problem& p, int tile) {
  const int64_t blocks = int64_t((p.len_q + tile - 1) / tile) * p.heads_total();
  if (blocks > INT_MAX) throw ft::Unsupported("flash backward: more than 2^31-1 blocks");
  return int(blocks);
}

/// The atomic-dQ kernel for tile shape T whose copies are Copy's: flash_backward_atomic_dq
/// (cp.async) or flash_backward_atomic_dq_sync (plain loads, variant flash_sync).
template <class T, class Copy>
auto atomic_dq_kernel() {
  if constexpr (std::is_same_v<Copy, CopySync>)
    return flash_backward_atomic_dq_sync<T>;
  else
    return flash_backward_atomic_dq<T>;
}

template <class T, DqStrategy kDq, class Copy>
void launch_flash(const ft::Problem& p, const BackwardParams& bp, cudaStream_t st) {
  const size_t smem = T::smem_bytes(true);
  if constexpr (kDq == DqStrategy::kAtomic) {
    auto* kernel = atomic_dq_kernel<T, Copy>();
    ft::allow_dynamic_smem(kernel, smem, "ch05 flash backward");
    kernel<<<grid_size(p, T::Bc), kThreads, smem, st>>>(bp);
    CUDA_CHECK_LAUNCH();
  } else {
    static_assert(std::is_same_v<Copy, CopyAsync>, "the dQ-pass kernels copy by cp.async");
    ft::allow_dynamic_smem(flash_backward_dkdv<T>, smem, "ch05 flash backward (dK, dV)");
    flash_backward_dkdv<T><<<grid_size(p, T::Bc), kThreads, smem, st>>>(bp);
    CUDA_CHECK_LAUNCH();
    const size_t smem_dq = T::smem_bytes(false);  // the dQ kernel keeps no P tile
    ft::allow_dynamic_smem(flash_backward_dq<T>, smem_dq, "ch05 flash backward (dQ)");
    flash_backward_dq<T><<<grid_size(p, T::Br), kThreads, smem_dq, st>>>(bp);
    CUDA_CHECK_LAUNCH();
  }
}

// The flash backward's compiled instances: float32 at three head dims (the registrations
// below list what this grid holds).
using Compiled = ft::Instances<ft::DTypes<ft::DType::Float32>, ft::HeadDims<32, 64, 128>>;

/// D = rowsum(dO∘O), dQ = 0 when it is summed by atomics, then the kernels for tile shape
/// Shape<d>, copying by Copy (CopyAsync; CopySync for flash_sync).
template <template <int> class Shape, DqStrategy kDq, class Copy = CopyAsync>
void flash_run(const ft::Problem& p, const ft::BackwardArgs& a, cudaStream_t st) {
  for (const void* ptr : {(const void*)a.Q, (const void*)a.K, (const void*)a.V, (const void*)a.dO,
                          (const void*)a.dQ, (const void*)a.dK, (const void*)a.dV})
    if (reinterpret_cast<uintptr_t>(ptr) % sizeof(float4) != 0)
      throw ft::Unsupported("flash backward: tensors must be 16-byte aligned (float4 access)");
  // A head dim not compiled is refused here, before any launch.
  Compiled::dispatch(p, "flash backward", [&](auto i) {
    // The atomic kernel adds every key tile's share into dQ, so dQ must start at zero (the
    // harness fills it with NaN on purpose: an output nobody clears would fail). The D
    // kernel clears it on its way through the rows.
    float* D = static_cast<float*>(a.workspace);
    float* zero_dQ = kDq == DqStrategy::kAtomic ? a.dQ : nullptr;
    compute_D(a.O, a.dO, D, p.rows(), p.head_dim, st, zero_dQ);
    const BackwardParams bp{a.Q, a.K, a.V, a.dO, a.lse, D, a.dQ, a.dK, a.dV,
                            p.len_q, p.causal, p.softmax_scale()};
    launch_flash<Shape<decltype(i)::kHeadDim>, kDq, Copy>(p, bp, st);
  });
}

// ---- Ledger pieces ---------------------------------------------------------------------------

int n_tiles(int N, int tile) { return (N + tile - 1) / tile; }
double tile_rows(int N, int tile, int t) { return std::min(tile, N - t * tile); }

/// Key-tile blocks of a dK/dV kernel that load query tile i: all of them; causal, the
/// blocks whose start tile floor(j·Bc/Br) is ≤ i, i.e. j < (i+1)·Br/Bc.
double blocks_visiting_query_tile(const ft::Problem& p, int i, int Br, int Bc) {
  const int n_kv = n_tiles(p.len_q, Bc);
  return p.causal ? std::min(n_kv, n_tiles((i + 1) * Br, Bc)) : n_kv;
}
/// Query-tile blocks of the dQ kernel that load key tile j: all; causal, those from tile
/// floor(j·Bc/Br) on (the tile holding key j·Bc).
double blocks_visiting_key_tile(const ft::Problem& p, int j, int Br, int Bc) {
  const int n_q = n_tiles(p.len_q, Br);
  return p.causal ? n_q - (j * Bc) / Br : n_q;
}

ft::KernelTraffic dot_dO_O_traffic(const ft::Problem& p, bool zero_dQ) {
  const double bytes_in = 2 * double(p.q_bytes());                  // O, dO
  const double bytes_out = double(p.rows()) * ft::kFloatBytes +          // D
                           (zero_dQ ? double(p.q_bytes()) : 0);     // dQ's zeros
  return {"dot_dO_O", bytes_in, bytes_out, bytes_in, bytes_out, 2.0 * double(p.elems()),
          zero_dQ ? "O and dO streamed once, D written once, dQ cleared once"
                  : "O and dO streamed once, D written once"};
}

/// flash_backward_atomic_dq (atomic_dq) or flash_backward_dkdv: per head, K and V read
/// once; each query tile's Q, dO, L, D (and dQ atomics) once per key-tile block visiting it.
ft::KernelTraffic dkdv_traffic(const ft::Problem& p, bool atomic_dq, int Br, int Bc) {
  const int N = p.len_q;
  const double d = p.head_dim, bh = double(p.heads_total()), fb = ft::kFloatBytes;
  double q_rows_loaded = 0;  // Σ over query tiles of (rows × blocks loading them), per head
  for (int i = 0; i < n_tiles(N, Br); ++i)
    q_rows_loaded += tile_rows(N, Br, i) * blocks_visiting_query_tile(p, i, Br, Bc);
  const double kv = 2 * double(p.kv_bytes());  // K, V in; dK, dV out: once each
  ft::KernelTraffic t;
  t.kernel = atomic_dq ? "flash_backward_atomic_dq" : "flash_backward_dkdv";
  t.read_bytes = kv + bh * q_rows_loaded * (2 * d + 2) * fb;
  t.write_bytes = kv + (atomic_dq ? bh * q_rows_loaded * d * fb : 0);
  // Products as the papers count them (2·N²·d each, halved causal): 5 with dQ, 4 without.
  t.flops = p.backward_flops() * (atomic_dq ? 5.0 : 4.0) / 5.0;
  // One head's Q, dO, dQ, L, D are what its key-tile blocks (adjacent on the grid) re-read.
  const double per_head_reread = double(N) * (3 * d + 2) * fb;
  if (ft::fits_l2(per_head_reread)) {
    const double compulsory = 4 * double(p.q_bytes()) + 2 * double(p.rows()) * fb;
    t.dram_read_bytes = compulsory + (atomic_dq ? double(p.q_bytes()) : 0);
    t.dram_write_bytes = kv + (atomic_dq ? double(p.q_bytes()) : 0);
    t.note = atomic_dq ? "Q,K,V,dO,L,D,dQ(zeros) read once; dK,dV,dQ written once: re-reads "
                         "and atomics stay in L2 (one head's Q,dO,dQ fit)"
                       : "Q,K,V,dO,L,D read once, dK,dV written once: one head's Q,dO re-reads "
                         "fit in L2";
  } else {
    t.dram_read_bytes = t.read_bytes;
    t.dram_write_bytes = t.write_bytes;
    t.note = "one head's Q,dO,dQ exceed the L2 share: every re-read counted (upper bound)";
  }
  return t;
}

/// flash_backward_dq: per head, Q, dO, L, D read once; each key tile's K, V once per
/// query-tile block visiting it; dQ written once.
ft::KernelTraffic dq_traffic(const ft::Problem& p, int Br, int Bc) {
  const int N = p.len_q;
  const double d = p.head_dim, bh = double(p.heads_total()), fb = ft::kFloatBytes;
  double kv_rows_loaded = 0;
  for (int j = 0; j < n_tiles(N, Bc); ++j)
    kv_rows_loaded += tile_rows(N, Bc, j) * blocks_visiting_key_tile(p, j, Br, Bc);
  const double q_side = 2 * double(p.q_bytes()) + 2 * double(p.rows()) * fb;  // Q, dO, L, D
  ft::KernelTraffic t;
  t.kernel = "flash_backward_dq";
  t.read_bytes = q_side + bh * kv_rows_loaded * 2 * d * fb;
  t.write_bytes = double(p.q_bytes());
  t.flops = p.backward_flops() * 3.0 / 5.0;  // S, dP and dS·K again: 3 products of 2·N²·d
  if (ft::fits_l2(2 * ft::matrix_bytes(N, d))) {
    t.dram_read_bytes = q_side + 2 * double(p.q_bytes());
    t.note = "Q,dO,L,D,K,V read once, dQ written once: one head's K,V re-reads fit in L2";
  } else {
    t.dram_read_bytes = t.read_bytes;
    t.note = "one head's K,V exceed the L2 share: every re-read counted (upper bound)";
  }
  t.dram_write_bytes = t.write_bytes;
  return t;
}

/// The baseline's products: re-read operands are the N×d matrices (one head's pair fits in
/// L2 up to N ≈ 30 000 at d = 128); the N×N operand streams through.
ft::KernelTraffic matmul(const ft::Problem& p, const char* what, int M, int N, int K) {
  const bool fit = ft::fits_l2(2 * ft::matrix_bytes(p.len_q, p.head_dim));
  return ch02::tiled_matmul_traffic(what, M, N, K, p.heads_total(), fit);
}

}  // namespace

// ---- Ledgers ---------------------------------------------------------------------------------

size_t materialize_workspace_bytes(const ft::Problem& p) {
  return 2 * p.grid_bytes() + size_t(p.rows()) * sizeof(float);
}
size_t flash_workspace_bytes(const ft::Problem& p) { return size_t(p.rows()) * sizeof(float); }

std::vector<ft::KernelTraffic> materialize_forward_traffic(const ft::Problem& p) {
  const int N = p.len_q, d = p.head_dim;
  return {matmul(p, "S = scale*Q*K^T", N, N, d), ch03::attention_softmax_traffic(p),
          matmul(p, "O = P*V", N, d, N)};
}

std::vector<ft::KernelTraffic> materialize_traffic(const ft::Problem& p) {
  const int N = p.len_q, d = p.head_dim;
  const double grid = double(p.grid_bytes()), stats = double(p.rows()) * ft::kFloatBytes;
  const ft::KernelTraffic ds{"softmax_backward", 2 * grid + stats, grid, 2 * grid + stats, grid,
                             2.0 * double(p.grid_elems()),
                             "P and dP read, dS written: three N^2 grids streamed once"};
  return {matmul(p, "dV = P^T*dO", N, d, N), matmul(p, "dP = dO*V^T", N, N, d),
          dot_dO_O_traffic(p, false), ds,
          matmul(p, "dQ = scale*dS*K", N, d, N), matmul(p, "dK = scale*dS^T*Q", N, d, N)};
}

std::vector<ft::KernelTraffic> flash_traffic(const ft::Problem& p) {
  constexpr int Br = DefaultTiles<64>::Br, Bc = DefaultTiles<64>::Bc;  // the same for every d
  return {dot_dO_O_traffic(p, true), dkdv_traffic(p, true, Br, Bc)};
}

std::vector<ft::KernelTraffic> flash_sync_traffic(const ft::Problem& p) {
  std::vector<ft::KernelTraffic> ledger = flash_traffic(p);
  ledger.back().kernel = "flash_backward_atomic_dq_sync";  // the same loads, made otherwise
  return ledger;
}

std::vector<ft::KernelTraffic> flash_wide_keys_traffic(const ft::Problem& p) {
  const int Br = WideKeyTiles<64>::Br;
  const int Bc = p.head_dim <= 64 ? WideKeyTiles<64>::Bc : WideKeyTiles<128>::Bc;
  std::vector<ft::KernelTraffic> ledger = flash_traffic(p);
  ledger.back() = dkdv_traffic(p, true, Br, Bc);
  return ledger;
}

std::vector<ft::KernelTraffic> flash_dq_pass_traffic(const ft::Problem& p) {
  constexpr int Br = DefaultTiles<64>::Br, Bc = DefaultTiles<64>::Bc;
  return {dot_dO_O_traffic(p, false), dkdv_traffic(p, false, Br, Bc), dq_traffic(p, Br, Bc)};
}

// ---- The implementations ---------------------------------------------------------------------

const ft::ForwardImpl& materialize_forward() {
  static const ft::ForwardImpl impl{"05", "materialize_forward",
                                    "S, softmax in place, O = P*V; P kept for the backward",
                                    {}, materialize_workspace_bytes, materialize_forward_run,
                                    materialize_forward_traffic};
  return impl;
}

const ft::BackwardImpl& materialize() {
  static const ft::BackwardImpl impl{"05", "materialize",
                                     "P stored by the forward; 4 products + dS over N^2 grids",
                                     {}, materialize_workspace_bytes, materialize_forward_run,
                                     materialize_backward_run, materialize_traffic};
  return impl;
}

/// A flash backward: chapter 04's fast forward before it, this chapter's compiled grid.
ft::BackwardImpl flash_impl(const char* variant, const char* what, ft::BackwardFn run,
                            ft::TrafficFn traffic) {
  return {"05", variant, what, Compiled::head_dims(), flash_workspace_bytes, ch04::fast().run,
          run, traffic, Compiled::dtypes()};
}

const ft::BackwardImpl& flash() {
  static const ft::BackwardImpl impl = flash_impl(
      "flash", "P recomputed from Q, K, L on chip; dQ by atomicAdd",
      flash_run<DefaultTiles, DqStrategy::kAtomic>, flash_traffic);
  return impl;
}

const ft::BackwardImpl& flash_sync() {
  static const ft::BackwardImpl impl = flash_impl(
      "flash_sync", "as flash, plain loads instead of cp.async (no overlap)",
      flash_run<DefaultTiles, DqStrategy::kAtomic, CopySync>, flash_sync_traffic);
  return impl;
}

const ft::BackwardImpl& flash_dq_pass() {
  static const ft::BackwardImpl impl = flash_impl(
      "flash_dq_pass", "P recomputed; dQ in a second kernel, no atomics",
      flash_run<DefaultTiles, DqStrategy::kSeparatePass>, flash_dq_pass_traffic);
  return impl;
}

const ft::BackwardImpl& flash_wide_keys() {
  static const ft::BackwardImpl impl = flash_impl(
      "flash_bc128", "as flash, 128 keys a block (d <= 64; d = 128: = flash)",
      flash_run<WideKeyTiles, DqStrategy::kAtomic>, flash_wide_keys_traffic);
  return impl;
}

std::vector<ft::BackwardImpl> backward_impls() {
  return {materialize(), flash(), flash_sync(), flash_dq_pass(), flash_wide_keys()};
}

}  // namespace ch05

FT_REGISTER(ch05) {
  // The baseline keeps P in its own forward's workspace; the flash backwards read O and the
  // lse of chapter 04's fused forward.
  const ft::ForwardImpl& keeps_p = ch05::materialize_forward();
  ft::register_forward(keeps_p);
  for (const auto& impl : ch05::backward_impls()) {
    const bool baseline = impl.variant == ch05::materialize().variant;
    const bool flash = impl.variant == ch05::flash().variant;
    const ft::ForwardImpl& forward = baseline ? keeps_p : ch04::fast();
    ft::register_backward(impl, ft::impl_name(forward.chapter, forward.variant),
                          /*headline=*/flash, /*tour=*/flash || baseline);
  }
}
