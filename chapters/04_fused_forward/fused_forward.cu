// Chapter 04: the fused forward kernel. One kernel per forward pass: a block owns Br query
// rows, streams K/V tiles of Bc rows through shared memory, computes each score tile on chip,
// folds it into a running max m, sum l and output O (the online softmax of chapter 03), and
// writes O and the log-sum-exp once. S and P never touch device memory.
//
// Two kernels, a staircase:
//   fused_forward_simple_kernel  one thread per query row: the idea, plainly
//   fused_forward_kernel         register-tiled like an SGEMM: the same idea, fast
#include <algorithm>
#include <climits>
#include <string>

#include "04_fused_forward/fused_forward.hpp"
#include "04_fused_forward/tile_ops.cuh"
#include "capi.hpp"
#include "check.cuh"
#include "launch.cuh"
#include "online_softmax.cuh"

namespace ch04 {
namespace {

using ft::ceil_div;

// ---------------------------------------------------------------------------------------
// 1. simple: one thread per query row
// ---------------------------------------------------------------------------------------

// Query rows per block = threads per block: 4 warps; at N = 4096, B·H = 128 that is 4096
// blocks, 31 per SM: every SM has work (see the README for a design that had too few).
constexpr int kSimpleBr = 128;
// Keys per K/V tile: a row's 32 scores of one tile live in registers (s[32]), next to its
// output row (o[d]): 32 + 128 floats at d = 128 still fit in a thread's 255 registers.
constexpr int kSimpleBc = 32;

template <int D>
constexpr size_t simple_smem_bytes() {
  return sizeof(float) * (D * kSimpleBr + 2 * kSimpleBc * D);  // Qᵀ, K tile, V tile
}

template <int D>
__global__ void __launch_bounds__(kSimpleBr)
    fused_forward_simple_kernel(const float* __restrict__ Q, const float* __restrict__ K,
                                const float* __restrict__ V, float* __restrict__ O,
                                float* __restrict__ lse, int N, int num_q_tiles, bool causal,
                                float scale_log2) {
  constexpr int Br = kSimpleBr, Bc = kSimpleBc;
  extern __shared__ float4 smem_simple[];  // float4: 16-byte aligned
  float* Qt = reinterpret_cast<float*>(smem_simple);  // [D][Br] queries: thread t owns column t
  float* Ks = Qt + D * Br;                             // [Bc][D] one tile of keys
  float* Vs = Ks + Bc * D;                             // [Bc][D] and of values

  const int t = threadIdx.x;
  // Last query tile first: under the causal mask it has the most keys (see the fast kernel).
  const int q0 = (num_q_tiles - 1 - int(blockIdx.x % num_q_tiles)) * Br;
  const int64_t head = blockIdx.x / num_q_tiles;  // b·H + h
  Q += head * N * D, K += head * N * D, V += head * N * D, O += head * N * D, lse += head * N;
  const int row = q0 + t;  // this thread's query

  // The query row, with scale·log2(e) folded in so that q·k comes out in base-2 units. It
  // sits in shared memory, not registers, to leave the registers to s[] and o[]; only this
  // thread reads column t, and a warp reads 32 consecutive floats: no bank conflicts.
  for (int k = 0; k < D; ++k) Qt[k * Br + t] = row < N ? Q[int64_t(row) * D + k] * scale_log2 : 0.f;

  float o[D];
#pragma unroll
  for (int c = 0; c < D; ++c) o[c] = 0.f;
  ft::OnlineSoftmax st = ft::online_softmax_empty();

  const int kv_end = causal ? min(N, q0 + Br) : N;  // causal: no key past the last query
  for (int kv0 = 0; kv0 < kv_end; kv0 += Bc) {
    __syncthreads();  // every thread is done with the previous tile
    for (int i = t; i < Bc * D; i += Br) {  // coalesced: consecutive threads, consecutive floats
      const int j = i / D;
      const bool inside = kv0 + j < N;  // rows past N: zeros (never NaN times a zero weight)
      Ks[i] = inside ? K[int64_t(kv0) * D + i] : 0.f;
      Vs[i] = inside ? V[int64_t(kv0) * D + i] : 0.f;
    }
    __syncthreads();

    // Scores of this row against the tile's Bc keys. k outermost: each q value is read once
    // and used Bc times; Ks[j][k] is the same address for every thread (a broadcast).
    float s[Bc];
#pragma unroll
    for (int j = 0; j < Bc; ++j) s[j] = 0.f;
    for (int k = 0; k < D; ++k) {
      const float q = Qt[k * Br + t];
#pragma unroll
      for (int j = 0; j < Bc; ++j) s[j] = fmaf(q, Ks[j * D + k], s[j]);
    }

    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < Bc; ++j) {
      if (kv0 + j >= N || (causal && kv0 + j > row)) s[j] = -INFINITY;  // masked: weight 0
      tile_max = fmaxf(tile_max, s[j]);
    }
    // Online softmax: raise m, rescale l and the output row by alpha = 2^(m_old − m_new).
    const float alpha = ft::online_rescale(st, tile_max);
    const float base = ft::online_exp_base(st.m);
#pragma unroll
    for (int c = 0; c < D; ++c) o[c] *= alpha;
#pragma unroll
    for (int j = 0; j < Bc; ++j) {
      const float p = exp2f(s[j] - base);
      st.l += p;
#pragma unroll
      for (int c = 0; c < D; ++c) o[c] = fmaf(p, Vs[j * D + c], o[c]);
    }
  }

  if (row < N) {  // the division by l, once per row, at the end
    const float inv_l = 1.f / st.l;
#pragma unroll
    for (int c = 0; c < D; ++c) O[int64_t(row) * D + c] = o[c] * inv_l;
    lse[row] = ft::online_lse(st);
  }
}

// ---------------------------------------------------------------------------------------
// 2. fast: register tiles, like an SGEMM
// ---------------------------------------------------------------------------------------

/// The fast kernel's tile shape. Template parameters, so that every loop bound and every
/// register array size is a compile-time constant.
template <int D_, int Br_, int Bc_, int TC_>
struct FastTiles {
  static constexpr int D = D_;    ///< head dimension
  static constexpr int Br = Br_;  ///< query rows per block
  static constexpr int Bc = Bc_;  ///< keys per K/V tile
  static constexpr int TC = TC_;  ///< threads that share a row (a power of two ≤ 32)
  /// Rows per thread: two runs of 4 (two float4 reads). With 8 columns that is an 8×8
  /// outer product, 64 FMAs for 16 floats read from shared memory.
  static constexpr int kRowsPerThread = 8;
  static constexpr int TR = Br / kRowsPerThread;  ///< threads down the rows
  static constexpr int kThreads = TR * TC;
  using Rows = Split<Br, TR>;   ///< a thread's rows, the same in S and O: m, l stay private
  using SCols = Split<Bc, TC>;  ///< its columns (keys) of the score tile S
  using OCols = Split<D, TC>;   ///< its columns of the output tile O
  /// Pᵀ is written one column of S at a time, so lanes holding different columns write
  /// different rows of Pᵀ; with a row stride of exactly Br (a multiple of 32 floats) those
  /// rows all start on bank 0 and the stores conflict. 4 more floats shift each row by 4
  /// banks, and keep it 16-byte aligned for the float4 stores.
  static constexpr int kPadP = 4;
  static constexpr int kLdP = Br + kPadP;
  static constexpr size_t kSmemBytes = sizeof(float) * (D * Br + D * Bc + Bc * D + Bc * kLdP);
  static_assert(Br % kRowsPerThread == 0 && D % 4 == 0, "whole runs of 4");
  static_assert(kThreads % 32 == 0, "whole warps: the row shuffles use every lane");
  static_assert(kSmemBytes <= 227 * 1024, "at most 227 KB of shared memory per block");
};

template <class T>
__global__ void __launch_bounds__(T::kThreads)
    fused_forward_kernel(const float* __restrict__ Q, const float* __restrict__ K,
                         const float* __restrict__ V, float* __restrict__ O,
                         float* __restrict__ lse, int N, int num_q_tiles, bool causal,
                         float scale_log2) {
  constexpr int D = T::D, Br = T::Br, Bc = T::Bc, TC = T::TC;
  using Rows = typename T::Rows;
  using SCols = typename T::SCols;
  using OCols = typename T::OCols;
  constexpr int kRows = Rows::kCount, kSCols = SCols::kCount, kOCols = OCols::kCount;

  extern __shared__ float4 smem_fast[];  // float4: 16-byte aligned for the vector reads
  float* Qt = reinterpret_cast<float*>(smem_fast);  // [D][Br]  Q tile, transposed, scaled
  float* Kt = Qt + D * Br;                          // [D][Bc]  K tile, transposed
  float* Vs = Kt + D * Bc;                          // [Bc][D]  V tile, as stored
  float* Pt = Vs + Bc * D;                          // [Bc][kLdP] probabilities, transposed

  const int tc = threadIdx.x % TC, tr = threadIdx.x / TC;
  // Last query tile first: under the causal mask it has the most key tiles, and starting the
  // longest blocks first keeps the last wave short. Query tiles are the fastest-varying
  // index, so the blocks running together share one head's K and V in L2.
  const int q0 = (num_q_tiles - 1 - int(blockIdx.x % num_q_tiles)) * Br;
  const int64_t head = blockIdx.x / num_q_tiles;  // b·H + h
  Q += head * N * D, K += head * N * D, V += head * N * D, O += head * N * D, lse += head * N;

  // Q is read once and stays on chip; scale·log2(e) is folded in, so that S = Q·Kᵀ comes out
  // in base-2 units and every exp is one exp2.
  load_tile_transposed<Br, D, T::kThreads>(Qt, Q, q0, N, scale_log2);

  float o[kRows][kOCols] = {};     // this thread's part of the output tile, unnormalized
  ft::OnlineSoftmax row[kRows];    // m and this thread's share of l, per row
#pragma unroll
  for (int i = 0; i < kRows; ++i) row[i] = ft::online_softmax_empty();

  const int kv_end = causal ? min(N, q0 + Br) : N;  // causal: skip tiles above the diagonal
  for (int kv0 = 0; kv0 < kv_end; kv0 += Bc) {
    load_tile_transposed<Bc, D, T::kThreads>(Kt, K, kv0, N);
    load_tile<Bc, D, T::kThreads>(Vs, V, kv0, N);
    __syncthreads();  // the tiles (and, the first time, Qᵀ) are in place

    float s[kRows][kSCols] = {};  // S = Q·Kᵀ, this thread's micro-tile
    mma_tile<D, Rows, SCols>(s, Qt, Br, Kt, Bc, tr, tc);

    // Only two kinds of tile need a mask: the last one, past N; under causal, the ones that
    // cross the diagonal. A masked score is -inf: weight exp2(-inf) = 0.
    if (kv0 + Bc > N || (causal && kv0 + Bc - 1 > q0)) {
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        const int q = q0 + Rows::at(tr, i);
#pragma unroll
        for (int j = 0; j < kSCols; ++j) {
          const int key = kv0 + SCols::at(tc, j);
          if (key >= N || (causal && key > q)) s[i][j] = -INFINITY;
        }
      }
    }

    // Online softmax. The tile's row max needs all TC threads of the row (shuffles within a
    // warp); then each thread rescales its own part of l and O and exponentiates its scores.
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < kSCols; ++j) tile_max = fmaxf(tile_max, s[i][j]);
      const float alpha = ft::online_rescale(row[i], row_max<TC>(tile_max));
      const float base = ft::online_exp_base(row[i].m);  // never (-inf) - (-inf)
#pragma unroll
      for (int j = 0; j < kSCols; ++j) {
        s[i][j] = exp2_ftz(s[i][j] - base);  // P, in place
        row[i].l += s[i][j];
      }
#pragma unroll
      for (int c = 0; c < kOCols; ++c) o[i][c] *= alpha;
    }

    // O += P·V. The product needs whole rows of P, which TC threads hold between them:
    // P goes through shared memory, transposed, the layout mma_tile reads.
    store_tile_transposed<Rows, SCols>(Pt, T::kLdP, s, tr, tc);
    __syncthreads();  // all of Pᵀ written
    mma_tile<Bc, Rows, OCols>(o, Pt, T::kLdP, Vs, D, tr, tc);
    __syncthreads();  // everyone is done with Kᵀ, V and Pᵀ before the next tile overwrites them
  }

  // Epilogue: add up l across the row's threads, divide once, write O and lse once.
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    const float l = row_sum<TC>(row[i].l);
    const int q = q0 + Rows::at(tr, i);
    if (q < N) {
      store_fragment<OCols>(O + int64_t(q) * D, o[i], tc, l > 0.f ? 1.f / l : 0.f);
      if (tc == 0) lse[q] = ft::online_lse({row[i].m, l});
    }
  }
}

// ---------------------------------------------------------------------------------------
// Launchers
// ---------------------------------------------------------------------------------------

/// Blocks for B·H heads of ceil(N/Br) query tiles, in one flat grid.x (limit 2^31 − 1;
/// grid.y would cap B·H at 65535).
int grid_blocks(const ft::Problem& p, int Br) {
  const int64_t blocks = int64_t(ceil_div(p.seq_len, Br)) * p.heads_total();
  if (blocks > INT_MAX) throw ft::Unsupported("ch04: too many blocks for one grid: " + p.describe());
  return int(blocks);
}


template <int D>
void launch_simple(const ft::Problem& p, const ft::ForwardArgs& a, cudaStream_t stream) {
  // Dynamic shared memory above 48 KB must be asked for, once per kernel (launch.cuh).
  ft::allow_dynamic_smem(fused_forward_simple_kernel<D>, simple_smem_bytes<D>(), "ch04 simple");
  fused_forward_simple_kernel<D><<<grid_blocks(p, kSimpleBr), kSimpleBr, simple_smem_bytes<D>(),
                                   stream>>>(a.Q, a.K, a.V, a.O, a.lse, p.seq_len,
                                             ceil_div(p.seq_len, kSimpleBr), p.causal,
                                             p.softmax_scale() * ft::kLog2e);
  CUDA_CHECK_LAUNCH();
}

void run_simple(const ft::Problem& p, const ft::ForwardArgs& a, cudaStream_t stream) {
  switch (p.head_dim) {
    case 32: return launch_simple<32>(p, a, stream);
    case 64: return launch_simple<64>(p, a, stream);
    case 128: return launch_simple<128>(p, a, stream);
  }
  throw ft::Unsupported("ch04 simple: head_dim must be 32, 64 or 128");
}

template <class T>
void launch_fast(const ft::Problem& p, const ft::ForwardArgs& a, cudaStream_t stream) {
  ft::allow_dynamic_smem(fused_forward_kernel<T>, T::kSmemBytes, "ch04 fast");
  fused_forward_kernel<T><<<grid_blocks(p, T::Br), T::kThreads, T::kSmemBytes, stream>>>(
      a.Q, a.K, a.V, a.O, a.lse, p.seq_len, ceil_div(p.seq_len, T::Br), p.causal,
      p.softmax_scale() * ft::kLog2e);
  CUDA_CHECK_LAUNCH();
}

// The tile shapes registered as variants, fast_<Br>x<Bc>. TC (threads per row) is 8 where
// that keeps the output micro-tile at 8×(d/8) registers; 64-row tiles use 16 so that a
// block still has 128 threads, and 128×64 at d = 128 uses 16 to keep the 8×8 score tile
// next to an 8×8 output tile (256 threads).
template <int D> using Tiles128x32 = FastTiles<D, 128, 32, 8>;
template <int D> using Tiles128x64 = FastTiles<D, 128, 64, D == 128 ? 16 : 8>;
template <int D> using Tiles64x64 = FastTiles<D, 64, 64, 16>;
template <int D> using Tiles64x32 = FastTiles<D, 64, 32, 16>;

template <template <int> class Tiles>
void run_fast(const ft::Problem& p, const ft::ForwardArgs& a, cudaStream_t stream) {
  switch (p.head_dim) {
    case 32: return launch_fast<Tiles<32>>(p, a, stream);
    case 64: return launch_fast<Tiles<64>>(p, a, stream);
    case 128: return launch_fast<Tiles<128>>(p, a, stream);
  }
  throw ft::Unsupported("ch04 fast: head_dim must be 32, 64 or 128");
}

// ---------------------------------------------------------------------------------------
// Ledgers and implementations
// ---------------------------------------------------------------------------------------

std::vector<ft::KernelTraffic> traffic_simple(const ft::Problem& p) {
  return {fused_forward_traffic(p, "fused_forward_simple_kernel", kSimpleBr, kSimpleBc)};
}

template <template <int> class Tiles>
std::vector<ft::KernelTraffic> traffic_fast(const ft::Problem& p) {
  const char* name = "fused_forward_kernel";
  switch (p.head_dim) {
    case 32: return {fused_forward_traffic(p, name, Tiles<32>::Br, Tiles<32>::Bc)};
    case 64: return {fused_forward_traffic(p, name, Tiles<64>::Br, Tiles<64>::Bc)};
    case 128: return {fused_forward_traffic(p, name, Tiles<128>::Br, Tiles<128>::Bc)};
  }
  throw ft::Unsupported("ch04 fast: head_dim must be 32, 64 or 128");
}

size_t no_workspace(const ft::Problem&) { return 0; }

template <template <int> class Tiles>
ft::ForwardImpl fast_impl(const std::string& variant, const std::string& what) {
  return {"04", variant, what, {32, 64, 128}, no_workspace, run_fast<Tiles>, traffic_fast<Tiles>};
}

}  // namespace

double kv_rows_loaded(const ft::Problem& p, int Br, int Bc) {
  const int N = p.seq_len;
  double rows = 0;
  for (int q0 = 0; q0 < N; q0 += Br) {
    const int kv_end = p.causal ? std::min(N, q0 + Br) : N;
    rows += std::min(N, ceil_div(kv_end, Bc) * Bc);
  }
  return rows;
}

ft::KernelTraffic fused_forward_traffic(const ft::Problem& p, const char* kernel, int Br, int Bc) {
  const double heads = double(p.heads_total()), N = p.seq_len, d = p.head_dim;
  const double head_bytes = ft::matrix_bytes(p, N, d);  // one head's Q (or K, V, O)
  ft::KernelTraffic t;
  t.kernel = kernel;
  t.read_bytes = heads * (head_bytes + 2 * ft::matrix_bytes(p, kv_rows_loaded(p, Br, Bc), d));
  t.write_bytes = heads * (head_bytes + ft::matrix_bytes(N, 1));  // O, and lse in float32
  const bool kv_in_l2 = ft::fits_l2(2 * head_bytes);
  t.dram_read_bytes = kv_in_l2 ? heads * 3 * head_bytes : t.read_bytes;
  t.dram_write_bytes = t.write_bytes;
  t.flops = p.forward_flops();
  t.note = kv_in_l2 ? "K/V re-reads hit L2 (a head's K+V fits; its query tiles run together): "
                      "Q, K, V, O, lse cross DRAM once"
                    : "a head's K+V exceeds the L2 share: every K/V re-read counted as DRAM";
  return t;
}

const ft::ForwardImpl& simple() {
  static const ft::ForwardImpl impl{
      "04", "simple", "fused: a thread per query row, K/V tiles in shared memory, online softmax",
      {32, 64, 128}, no_workspace, run_simple, traffic_simple};
  return impl;
}

const ft::ForwardImpl& fast() {
  static const ft::ForwardImpl impl = fast_impl<Tiles128x32>(
      "fast", "fused, register-tiled: 8x8 micro-tiles, float4 shared-memory reads");
  return impl;
}

std::vector<ft::ForwardImpl> forward_impls() {
  return {simple(),
          fast(),
          fast_impl<Tiles128x64>("fast_128x64", "fast kernel, Br=128 Bc=64"),
          fast_impl<Tiles64x64>("fast_64x64", "fast kernel, Br=64 Bc=64"),
          fast_impl<Tiles64x32>("fast_64x32", "fast kernel, Br=64 Bc=32")};
}

}  // namespace ch04

FT_EXPORT_FORWARD(ft_ch04_forward_simple, ch04::simple())
FT_EXPORT_FORWARD(ft_ch04_forward, ch04::fast())
