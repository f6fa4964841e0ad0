// Chapter 10's backward implementations: the staircase onto Hopper's instructions, their
// launch (one instance per dtype and d), their ledger and their registration.
#include "10_hopper_backward/hopper_backward.hpp"

#include <algorithm>
#include <climits>
#include <string>
#include <type_traits>

#include "09_hopper_forward/hopper_forward.hpp"
#include "10_hopper_backward/specialized_backward.cuh"
#include "10_hopper_backward/wgmma_backward.cuh"
#include "core/check.cuh"
#include "cuda_core/online_softmax.cuh"  // ft::kLog2e
#include "cuda_core/reduce.cuh"
#include "device/dispatch.cuh"
#include "device/launch.cuh"
#include "harness/registry.hpp"
#include "harness/traffic.hpp"
#include "sm80/pack.cuh"  // ft::tc::pack2, unpack2
#include "sm90/tma.hpp"

namespace ch10 {
namespace {

/// wgmma and its sm_90a machine code: Hopper, and only Hopper.
constexpr int kSm = 90;

using Compiled = ft::Instances<ft::DTypes<ft::DType::BFloat16, ft::DType::Float16>, ft::HeadDims<64, 128>>;
using CompiledD64 = ft::Instances<ft::DTypes<ft::DType::BFloat16, ft::DType::Float16>, ft::HeadDims<64>>;
using CompiledD128 = ft::Instances<ft::DTypes<ft::DType::BFloat16, ft::DType::Float16>, ft::HeadDims<128>>;
/// The first head dimension a set compiles: the traits' d where what they hold is the same at
/// every d (the ledger's tiles, whether the loads are the copy engine's).
template <class Set> struct FirstHeadDim;
template <ft::DType... Ts, int D0, int... Ds>
struct FirstHeadDim<ft::Instances<ft::DTypes<Ts...>, ft::HeadDims<D0, Ds...>>> {
  static constexpr int value = D0;
};

// Step 1, wgmma: the five products on warpgroup instructions, cp.async loads.
template <class T, int D> using Wgmma = WgmmaBackwardTraits<T, D>;
// Step 2, specialized: a producer (TMA, a ring of query-tile stages) and two consumers;
// dQ computed once a block, added by atomics.
template <class T, int D> using Specialized = SpecializedBackwardTraits<T, D, DqAdd::kAtomics>;
// Step 3, bulk_dq: the same, dQ added by the copy engine from shared memory.
template <class T, int D> using BulkDq = SpecializedBackwardTraits<T, D, DqAdd::kBulk>;
// Step 4, deterministic: step 3 with the key blocks' adds into each query tile in key order.
template <class T, int D> using Deterministic = SpecializedBackwardTraits<T, D, DqAdd::kBulk, /*deterministic=*/true>;
// Step 5, overlap (d = 64): step 2 with the next tile's scores issued behind this tile's dQ.
template <class T, int D> using Overlap = SpecializedBackwardTraits<T, D, DqAdd::kAtomics, false, Schedule::kNextScores>;
// Step 6, tall (d = 64): step 2 with query tiles of 128, dQ split between the consumers by rows.
template <class T, int D> using Tall = SpecializedBackwardTraits<T, D, DqAdd::kAtomics, false, Schedule::kInOrder, /*Br=*/128>;
// Step 6 with step 3's adds (tall_bulk): twice the atomics a thread a tile that step 2 issues at
// d = 64, the count at which the copy engine paid at d = 128.
template <class T, int D> using TallBulk = SpecializedBackwardTraits<T, D, DqAdd::kBulk, false, Schedule::kInOrder, /*Br=*/128>;
// Step 7, p_under_dp: step 3 with Sᵀ and dPᵀ as two commit groups, so that P's exponentials
// and dV's product run while dPᵀ's product does (FlashAttention-3's overlap inside a warpgroup).
template <class T, int D> using PUnderDp = SpecializedBackwardTraits<T, D, DqAdd::kBulk, false, Schedule::kPUnderDp>;
// Step 8, lean: the fastest structure below (step 3 at d = 128, step 6 at d = 64) with fewer
// instructions between the products: only the tiles that can hold a hidden pair masked, and
// the softmax scale applied to dK and dQ once an element instead of to every dS.
template <class T, int D>
using Lean = std::conditional_t<D == 128, SpecializedBackwardTraits<T, D, DqAdd::kBulk, false, Schedule::kInOrder, 64, true>,
                                SpecializedBackwardTraits<T, D, DqAdd::kAtomics, false, Schedule::kInOrder, 128, true>>;
// Step 9, persistent: step 8 on one block an SM, each taking key blocks from a counter, so
// that a key block's K, V and first query tiles load while the previous one's dK and dV are
// stored.
template <class T, int D>
using Persistent =
    std::conditional_t<D == 128,
                       SpecializedBackwardTraits<T, D, DqAdd::kBulk, false, Schedule::kInOrder, 64, true, true>,
                       SpecializedBackwardTraits<T, D, DqAdd::kAtomics, false, Schedule::kInOrder, 128, true, true>>;
// Step 10, tile_dq: step 9 with dQ's accumulator laid out a query tile at a time in the
// consumers' register order, so that the copy engine adds a whole tile with one bulk add; at
// d = 64 the adds go to the copy engine too (step 6's `tall_bulk` tiles), not the atomics.
template <class T, int D>
using TileDq = SpecializedBackwardTraits<T, D, DqAdd::kBulk, false, Schedule::kInOrder, D == 128 ? 64 : 128,
                                         /*lean=*/true, /*persistent=*/true, /*dq_tiles=*/true>;
// Step 11, dq_turns (d = 128): step 10 with the consumers taking turns at dQ, a whole tile's
// each, so that one goes on to the next tile's products while the other computes dQ; dSᵀ in
// two buffers, one meeting a tile.
template <class T, int D>
using DqTurns = SpecializedBackwardTraits<T, D, DqAdd::kBulk, false, Schedule::kInOrder, 64, /*lean=*/true,
                                          /*persistent=*/true, /*dq_tiles=*/true, /*dq_turns=*/true>;
// fastest: step 11 at d = 128, step 10 at d = 64 (step 11 computes d = 128 only). On an H100,
// in the chapter's program (one process a shape, two rounds in opposite orders,
// plots/results/h100/ch10_dq_turns_ab.csv, bf16), step 11 ran 1.05-1.12x step 10 on all eight
// d = 128 shapes, N = 1024 to 32768, causal and not.
// Step 10 held the title before: against step 9's libraries in one process (two rounds in
// opposite orders, plots/results/h100/ch10_tile_dq_ab.csv, bf16): 1.02-1.08x at d = 128 and
// 1.15-1.17x at d = 64 from N = 4096, 0.99-1.00x and 1.04-1.05x at N = 1024 under the mask.
// Step 9 held the title before: on an H100, in one run beside step 8 and PyTorch's backends
// (plots/results/h100/ch10_fastest.csv, bf16), it ran 1.00-1.07x step 8 at N <= 4096 (1.04x at
// the training model's shape, B = 8, 12 heads, N = 1024, d = 64, causal), 0.97-1.00x at
// N >= 16384 under the mask and 0.93-0.98x at N = 16384 without it, where the chapter's
// program, alternating the two, timed them 1.00-1.01x apart (ch10_counter_program.csv).
// Step 8 held the title before: 1.03-1.21x steps 3 and 6 on the H200
// (plots/results/h200/ch10_vs_pytorch.csv).
template <class T, int D> using Fastest = std::conditional_t<D == 128, DqTurns<T, D>, TileDq<T, D>>;

constexpr int kSmallBlock = 256;  ///< threads of the small kernels
/// Elements a thread moves at a time in the small kernels: 8, one 16-byte load of bf16/fp16
/// (every row of O, dO and dQ starts 16-byte aligned: ft::check_strides), two of float32.
/// Both kernels only stream bytes; with 16 bytes a load rather than 2 or 4 a thread, enough
/// of them are in flight to keep device memory busy.
constexpr int kChunk = 8;

using ft::tc::pack2;     // sm80/pack.cuh
using ft::tc::unpack2;

/// The per-row statistics the backward reads, laid out for the copy engine and padded so
/// that no kernel checks a bound: d/8 threads a query row (8 at d = 64, 16 at d = 128), each
/// with 8 elements of O and dO, and a row's L2 and Drow, whose rows a head are N_q padded to
/// whole query tiles (stats_rows). For a row of the problem, D = rowsum(dO∘O) (shuffles
/// across the row's threads sum in float32), L2 = lse·log2(e) (the kernels' exponentials are
/// base 2), and its float32 dQ accumulator cleared on the way; a padding row gets L2 = −∞
/// and D = 0, which weigh nothing; and step 9's counter of key blocks set to 0. kViews: O
/// and dO where their strides say. kDqTiles: the accumulator is laid out in whole tiles
/// (padded rows included), and every padded row's d floats of it are cleared.
template <class T, int D, bool kViews, bool kDqTiles>
__global__ void prepare_backward(const T* O, const T* dO, ft::Strides so, ft::Strides sdo, int heads,
                                 const float* lse, float* L2, float* Drow, float* dq_acc, int* next_work,
                                 int64_t padded_rows, int stats_rows, int Nq) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *next_work = 0;
  constexpr int kLanes = D / kChunk;                   // threads a row: a power of two, within a warp
  constexpr int kRowsPerBlock = kSmallBlock / kLanes;  // 32 at d = 64, 16 at d = 128
  static_assert(kLanes <= ft::kWarpSize && ft::kWarpSize % kLanes == 0, "a row's threads lie in one warp");
  const int64_t prow = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kLanes;
  const int lane = threadIdx.x % kLanes, col = lane * kChunk;
  const int q = int(prow % stats_rows);
  const bool real = prow < padded_rows && q < Nq;  // a row of the problem, not padding
  float sum = 0.f;
  int64_t row = 0;
  if (real) {
    const int64_t bh = prow / stats_rows;  // b·H + h
    row = bh * Nq + q;                     // the row of lse and of dQ's accumulator
    const T* o = kViews ? O + ft::head_start(so, bh, heads) + int64_t(q) * so.row : O + row * D;
    const T* g = kViews ? dO + ft::head_start(sdo, bh, heads) + int64_t(q) * sdo.row : dO + row * D;
    const uint4 ov = *reinterpret_cast<const uint4*>(o + col), gv = *reinterpret_cast<const uint4*>(g + col);
    const uint32_t oa[4] = {ov.x, ov.y, ov.z, ov.w}, ga[4] = {gv.x, gv.y, gv.z, gv.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 a = unpack2<T>(oa[i]), b = unpack2<T>(ga[i]);
      sum = fmaf(a.x, b.x, fmaf(a.y, b.y, sum));
    }
    if (!kDqTiles) {
      float4* acc = reinterpret_cast<float4*>(dq_acc + row * D + col);
      acc[0] = acc[1] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
  if (kDqTiles && prow < padded_rows) {
    float4* acc = reinterpret_cast<float4*>(dq_acc + prow * D + col);
    acc[0] = acc[1] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  // Every thread of the warp shuffles (a padding row's add 0): the row's kLanes threads sum.
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2) sum += __shfl_xor_sync(ft::kFullMask, sum, offset);
  if (lane != 0 || prow >= padded_rows) return;
  L2[prow] = real ? lse[row] * ft::kLog2e : -INFINITY;
  Drow[prow] = real ? sum : 0.f;
}

/// dQ = scale · its float32 accumulator (contiguous), rounded once: scale is the softmax scale
/// where the kernel left dS unscaled (step 8), else 1. A thread 8 elements of a row (two
/// float4 loads, one 16-byte store). kViews: where dQ's strides say.
template <class T, int D, bool kViews>
__global__ void convert_dq(const float* dq_acc, T* dQ, ft::Strides sdq, int heads, int Nq, int64_t chunks,
                           float scale) {
  constexpr int kChunksPerRow = D / kChunk;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < chunks; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / kChunksPerRow;
    const int col = int(i % kChunksPerRow) * kChunk;
    const float4 lo = *reinterpret_cast<const float4*>(dq_acc + row * D + col);
    const float4 hi = *reinterpret_cast<const float4*>(dq_acc + row * D + col + 4);
    const uint4 out = {pack2<T>(scale * lo.x, scale * lo.y), pack2<T>(scale * lo.z, scale * lo.w),
                       pack2<T>(scale * hi.x, scale * hi.y), pack2<T>(scale * hi.z, scale * hi.w)};
    T* at = dQ + row * D + col;
    if constexpr (kViews) {
      const int64_t bh = row / Nq;
      at = dQ + ft::head_start(sdq, bh, heads) + (row % Nq) * sdq.row + col;
    }
    *reinterpret_cast<uint4*>(at) = out;
  }
}

/// dQ = scale · its float32 accumulator laid out a query tile at a time in the consumers'
/// register order (Tr::kDqTiles; dq_tile_offset), rounded once. A thread reads one float4, a
/// consumer thread's registers 4j to 4j + 3, and writes them as two pairs, rows r and r + 8
/// of the tile (those before N_q). Tr: the step's tiles (Br, kDqByRows, kDqCols).
template <class Tr, bool kViews>
__global__ void convert_dq_tiles(const float* dq_acc, typename Tr::T* dQ, ft::Strides sdq, int heads, int Nq,
                                 int stats_rows, int64_t quads, float scale) {
  using T = typename Tr::T;
  constexpr int D = Tr::D;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < quads; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t at = 4 * i;                         // the float4's first float
    const int64_t bh = at / (int64_t(stats_rows) * D);  // b·H + h
    const int in_head = int(at % (int64_t(stats_rows) * D));
    const int q0 = in_head / (Tr::Br * D) * Tr::Br;   // the tile's first query
    const ft::tc::RowCol at_tile = dq_tile_place<Tr>(in_head % (Tr::Br * D));
    const int row = at_tile.row, col = at_tile.col;  // rows row and row + 8, columns col and col + 1
    const float4 v = *reinterpret_cast<const float4*>(dq_acc + at);
    const float2 pair[2] = {{v.x, v.y}, {v.z, v.w}};
    for (int h = 0; h < 2; ++h) {
      const int q = q0 + row + 8 * h;
      if (q >= Nq) continue;
      T* out = kViews ? dQ + ft::head_start(sdq, bh, heads) + int64_t(q) * sdq.row + col
                      : dQ + (bh * Nq + q) * D + col;
      *reinterpret_cast<uint32_t*>(out) = pack2<T>(scale * pair[h].x, scale * pair[h].y);
    }
  }
}

/// Rows of the statistics a query head: N_q padded to whole query tiles of kStatsTile rows
/// (the tallest step's Br), so that a kernel reads a whole tile's L2 and D with no bound
/// check (the padding weighs nothing), and dQ's accumulator after them starts 256-byte aligned.
constexpr int kStatsTile = 128;
static_assert(kStatsTile % Wgmma<__half, 64>::Br == 0 && kStatsTile % Specialized<__half, 64>::Br == 0 &&
                  kStatsTile % Tall<__half, 64>::Br == 0,
              "whole query tiles of every step");
int stats_rows(const ft::Problem& p) { return (p.len_q + kStatsTile - 1) / kStatsTile * kStatsTile; }
int64_t padded_rows(const ft::Problem& p) { return int64_t(p.heads_total()) * stats_rows(p); }

/// Query tiles a head has at the deterministic step's Br: its adds' counters, one a tile.
int64_t q_tiles(const ft::Problem& p) {
  constexpr int kBr = Deterministic<__half, 64>::Br;
  static_assert(Deterministic<__half, 128>::Br == kBr, "one count of counters for both head dims");
  return (p.len_q + kBr - 1) / kBr;
}

/// Floats of the dQ accumulator: d a padded row, so that it holds whole tiles (kDqTiles);
/// the other steps use its first N_q rows a head.
int64_t dq_acc_floats(const ft::Problem& p) { return padded_rows(p) * p.head_dim; }

/// The workspace: L2 and Drow (a float a padded row each), the float32 dQ accumulator, then
/// a counter a query tile (step 4's order of adds; allotted always, an int a tile) and step
/// 9's counter of key blocks.
size_t workspace_bytes(const ft::Problem& p) {
  return (2 * size_t(padded_rows(p)) + size_t(dq_acc_floats(p))) * sizeof(float) +
         size_t(q_tiles(p) * p.heads_total() + 1) * sizeof(int);
}

/// The three kernels of one step on contiguous tensors (Tr) or on views (ft::Views<Tr>: the
/// strides read from `layout`, a second instantiation so that the contiguous kernels stay
/// the ones measured).
template <class Tr>
void launch_on(const ft::Problem& p, const ft::BackwardArgs& a, const ft::Layout& layout, cudaStream_t stream) {
  using T = typename Tr::T;
  constexpr bool kViews = Tr::kViews;
  const int num_kv_tiles = (p.len_kv + Tr::Bc - 1) / Tr::Bc;
  const int64_t blocks = int64_t(num_kv_tiles) * p.kv_heads_total();
  if (blocks > INT_MAX) throw ft::Unsupported("chapter 10: too many key tiles for one launch");
  // The copy engine adds into dQ's accumulator (bulk_dq): its rows must be 16-byte aligned;
  // and the small kernels read O and write dQ 16 bytes at a time (every row's stride is a
  // multiple of 16 bytes: ft::check_strides), so the tensors must start aligned too.
  if (reinterpret_cast<uintptr_t>(a.workspace) % 16 != 0)
    throw ft::Unsupported("chapter 10: the workspace must start on a 16-byte boundary");
  for (const void* ptr : {a.O.get(), a.dO.get(), static_cast<const void*>(a.dQ.get())})
    if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0)
      throw ft::Unsupported("chapter 10: O, dO and dQ must start on a 16-byte boundary");
  const int64_t prows = padded_rows(p);
  float* L2 = static_cast<float*>(a.workspace);
  float* Drow = L2 + prows;
  float* dq_acc = Drow + prows;
  int* dq_turn = reinterpret_cast<int*>(dq_acc + dq_acc_floats(p));
  int* next_work = dq_turn + q_tiles(p) * p.heads_total();

  constexpr int kPrepRows = kSmallBlock / (Tr::D / kChunk);  // prepare_backward's rows a block
  prepare_backward<T, Tr::D, kViews, Tr::kDqTiles><<<int((prows + kPrepRows - 1) / kPrepRows), kSmallBlock, 0, stream>>>(
      a.O.as<T>(), a.dO.as<T>(), layout.O, layout.dO, p.heads_q, a.lse, L2, Drow, dq_acc, next_work, prows,
      stats_rows(p), p.len_q);
  CUDA_CHECK_LAUNCH();

  const Params<T> params{a.Q.as<T>(), a.K.as<T>(), a.V.as<T>(), a.dO.as<T>(), L2, Drow, dq_acc,
                         a.dK.as<T>(), a.dV.as<T>(), p.len_q, p.len_kv, stats_rows(p), (p.len_q + Tr::Br - 1) / Tr::Br,
                         num_kv_tiles, p.heads_q, p.heads_kv, p.group(), p.causal_offset(), p.causal,
                         p.softmax_scale(), p.softmax_scale() * ft::kLog2e, int(blocks)};
  if constexpr (Tr::kSpecialized) {
    const CUtensorMap map_q = ft::sm90::tensor_map(a.Q.get(), p.dtype, p.batch, p.heads_q, p.len_q, Tr::D, layout.Q, Tr::Br);
    const CUtensorMap map_do = ft::sm90::tensor_map(a.dO.get(), p.dtype, p.batch, p.heads_q, p.len_q, Tr::D, layout.dO, Tr::Br);
    const CUtensorMap map_k = ft::sm90::tensor_map(a.K.get(), p.dtype, p.batch, p.heads_kv, p.len_kv, Tr::D, layout.K, Tr::Bc);
    const CUtensorMap map_v = ft::sm90::tensor_map(a.V.get(), p.dtype, p.batch, p.heads_kv, p.len_kv, Tr::D, layout.V, Tr::Bc);
    if constexpr (Tr::kDeterministic)
      CUDA_CHECK(cudaMemsetAsync(dq_turn, 0, size_t(q_tiles(p) * p.heads_total()) * sizeof(int), stream));
    ft::allow_dynamic_smem(specialized_backward<Tr>, Tr::kSmemBytes, "chapter 10 backward");
    // Step 9: a block an SM (one fits: its registers and shared memory), or fewer if there
    // are fewer key blocks; the other steps, a block a key block.
    const int grid = Tr::kPersistent ? int(std::min<int64_t>(blocks, std::max(ft::sm_count(), 1))) : int(blocks);
    specialized_backward<Tr><<<grid, Tr::kThreads, Tr::kSmemBytes, stream>>>(
        params, GradStrides{layout.dK, layout.dV}, dq_turn, next_work, map_q, map_k, map_v, map_do);
  } else {
    ft::allow_dynamic_smem(wgmma_backward<Tr>, Tr::kSmemBytes, "chapter 10 backward");
    wgmma_backward<Tr><<<int(blocks), Tr::kThreads, Tr::kSmemBytes, stream>>>(params);
  }
  CUDA_CHECK_LAUNCH();

  const float scale = Tr::kLean ? p.softmax_scale() : 1.f;
  if constexpr (Tr::kDqTiles) {
    const int64_t quads = dq_acc_floats(p) / 4;
    const int c_blocks = int(std::min<int64_t>((quads + kSmallBlock - 1) / kSmallBlock, 1 << 16));
    convert_dq_tiles<Tr, kViews><<<c_blocks, kSmallBlock, 0, stream>>>(dq_acc, a.dQ.as<T>(), layout.dQ, p.heads_q,
                                                                       p.len_q, stats_rows(p), quads, scale);
  } else {
    const int64_t chunks = p.elems() / kChunk;
    const int c_blocks = int(std::min<int64_t>((chunks + kSmallBlock - 1) / kSmallBlock, 1 << 16));
    convert_dq<T, Tr::D, kViews><<<c_blocks, kSmallBlock, 0, stream>>>(dq_acc, a.dQ.as<T>(), layout.dQ, p.heads_q,
                                                                       p.len_q, chunks, scale);
  }
  CUDA_CHECK_LAUNCH();
}

template <class Tr>
void launch(const ft::Problem& p, const ft::BackwardArgs& a, cudaStream_t stream) {
  // Views: the copy engine's tensor maps read them, so steps 2 onwards only; a layout is
  // refused or checked before anything asks for the GPU.
  if (a.layout) {
    if constexpr (!Tr::kSpecialized)
      throw ft::Unsupported("chapter 10: step 1 (wgmma) reads no views; specialized, bulk_dq and fastest do");
    ft::check_layout(p, *a.layout, /*backward=*/true);
  }
  ft::require_arch(kSm, "chapter 10");
  if (!a.layout) return launch_on<Tr>(p, a, ft::layout_of(p, nullptr), stream);
  if constexpr (Tr::kSpecialized) launch_on<ft::Views<Tr>>(p, a, *a.layout, stream);
}

template <template <class, int> class Shape, class Set = Compiled>
void run(const ft::Problem& p, const ft::BackwardArgs& a, cudaStream_t stream) {
  if (!(p.softmax_scale() > 0.f)) throw ft::Unsupported("chapter 10: the softmax scale must be positive");
  Set::dispatch(p, "chapter 10", [&](auto i) {
    using I = decltype(i);
    launch<Shape<typename I::Element, I::kHeadDim>>(p, a, stream);
  });
}

/// The ledger: three kernels, as chapter 08's. The key-block kernel reads K and V once and
/// every query tile it visits (Q, dO, L, D), adds a float32 dQ share for each (Tr::kDqShares:
/// step 1 two, one a warpgroup; steps 2-3 one), and writes dK and dV once. From device memory
/// it reads K, V (N_k rows a key/value head), Q, dO, L, D (N_q rows a query head) and the
/// accumulator once, and writes dK, dV and the accumulator once.
template <template <class, int> class Shape, class Set>
std::vector<ft::KernelTraffic> traffic(const ft::Problem& p) {
  using Tr = Shape<__nv_bfloat16, FirstHeadDim<Set>::value>;  // Bc and the dQ shares are the same at every (T, d)
  const double fb = ft::kFloatBytes, eb = double(ft::dtype_bytes(p.dtype)), d = p.head_dim;
  const double prep_in = 2 * double(p.q_bytes()) + double(p.rows()) * fb;
  const double prep_out = 2 * double(padded_rows(p)) * fb + double(p.elems()) * fb;
  const double kv_tiles = (p.len_kv + Tr::Bc - 1) / Tr::Bc;
  // Query rows each key block visits: all of them, or under the causal mask about half.
  const double visited = double(p.rows()) * kv_tiles * (p.causal ? 0.5 : 1.0) / double(p.group());
  const double q_reads = visited * double(p.group()) * (2 * d * eb + 2 * fb);
  const double dq_adds = visited * double(p.group()) * d * fb * Tr::kDqShares;
  const double kv = 2 * double(p.kv_bytes());
  ft::KernelTraffic main{Tr::kSpecialized ? "specialized_backward" : "wgmma_backward", kv + q_reads, kv + dq_adds,
                         kv + 2 * double(p.q_bytes()) + 2 * double(p.rows()) * fb + double(p.elems()) * fb,
                         kv + double(p.elems()) * fb, p.backward_flops(),
                         "re-reads of Q, dO, L, D and the dQ atomics assumed to stay in L2"};
  const double conv_in = double(p.elems()) * fb, conv_out = double(p.q_bytes());
  return {{"prepare_backward", prep_in, prep_out, prep_in, prep_out, 2.0 * double(p.elems()),
           "O, dO, lse streamed once; L2, D and the dQ accumulator (zeros) written once"},
          main,
          {"convert_dq", conv_in, conv_out, conv_in, conv_out, 0.0, "the float32 dQ read once, dQ written once"}};
}

template <template <class, int> class Shape, class Set = Compiled>
ft::BackwardImpl impl(const std::string& variant, const std::string& what) {
  // Views: read by the copy engine's tensor maps, so by steps 2 onwards (step 1 copies with cp.async).
  const bool strided = Shape<__half, FirstHeadDim<Set>::value>::kSpecialized;
  ft::BackwardImpl b{"10", variant, what, Set::head_dims(), workspace_bytes, ch09::fastest().run,
                     run<Shape, Set>, traffic<Shape, Set>, Set::dtypes(), kSm, strided,
                     ft::Features{/*lengths=*/true, /*grouped=*/true}};
  return b;
}

}  // namespace

const ft::BackwardImpl& fastest() {
  static const ft::BackwardImpl i = impl<Fastest>("fastest", "dq_turns at d = 128, tile_dq at d = 64");
  return i;
}

std::vector<ft::BackwardImpl> backward_impls() {
  return {impl<Wgmma>("wgmma", "the five products on wgmma (keys on Sᵀ's rows), cp.async loads, dQ by atomics"),
          impl<Specialized>("specialized", "a TMA producer and two consumers; dQ once a block, by atomics"),
          impl<BulkDq>("bulk_dq", "dQ added by the copy engine from shared memory (cp.reduce.async.bulk)"),
          impl<Deterministic>("deterministic", "bulk_dq with each query tile's adds in key order: the same bits every run"),
          impl<Overlap, CompiledD64>("overlap", "specialized with the next tile's scores issued behind this tile's dQ (d = 64)"),
          impl<Tall, CompiledD64>("tall", "specialized with query tiles of 128: twice the products a wait (d = 64)"),
          impl<TallBulk, CompiledD64>("tall_bulk", "tall with bulk_dq's adds by the copy engine (d = 64)"),
          impl<PUnderDp>("p_under_dp", "bulk_dq with P's exponentials and dV's product under dPᵀ's product"),
          impl<Lean>("lean", "bulk_dq (d = 128) or tall (d = 64) with only the tiles that need it masked and dS unscaled"),
          impl<Persistent>("persistent", "lean on a block an SM, each taking key blocks from a counter"),
          impl<TileDq>("tile_dq", "persistent with dQ's accumulator in tiles: one bulk add a query tile, at d = 64 too"),
          impl<DqTurns, CompiledD128>("dq_turns", "tile_dq with the consumers taking turns at a whole tile's dQ (d = 128)"),
          fastest()};
}

}  // namespace ch10

FT_REGISTER(ch10) {
  // Every variant reads the O and lse of chapter 09's fastest forward.
  const std::string forward = ft::impl_name(ch09::fastest().chapter, ch09::fastest().variant);
  for (const auto& impl : ch10::backward_impls()) {
    const bool fastest = impl.variant == ch10::fastest().variant;
    ft::register_backward(impl, forward, /*headline=*/fastest, /*tour=*/fastest);
  }
}
