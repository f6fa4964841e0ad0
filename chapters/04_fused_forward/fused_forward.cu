// Chapter 04: the fused forward kernel. One kernel per forward pass: a block owns Br query
// rows, streams K/V tiles of Bc rows through shared memory, computes each score tile on chip,
// folds it into a running max m, sum l and output O (the online softmax of chapter 03), and
// writes O and the log-sum-exp once. S and P never touch device memory.
//
// Two kernels, a staircase, one file each (`diff` the two files to see the step):
//   thread_per_row.cuh  fused_forward_simple_kernel  one thread per query row: the idea, plainly
//   register_tiles.cuh  fused_forward_kernel         register-tiled like an SGEMM: the same idea, fast
// This file launches them, registers the variants and holds the ledger.
#include <algorithm>
#include <climits>
#include <string>

#include "04_fused_forward/fused_forward.hpp"
#include "harness/registry.hpp"
#include "core/check.cuh"
#include "device/dispatch.cuh"
#include "device/launch.cuh"
#include "cuda_core/online_softmax.cuh"

// The two kernels, in the staircase's order.
#include "04_fused_forward/thread_per_row.cuh"
#include "04_fused_forward/register_tiles.cuh"

namespace ch04 {
namespace {

using ft::ceil_div;

// ---------------------------------------------------------------------------------------
// Launchers
// ---------------------------------------------------------------------------------------

/// Blocks for B·H heads of ceil(N/Br) query tiles, in one flat grid.x (limit 2^31 − 1;
/// grid.y would cap B·H at 65535).
int grid_blocks(const ft::Problem& p, int Br) {
  const int64_t blocks = int64_t(ceil_div(p.len_q, Br)) * p.heads_total();
  if (blocks > INT_MAX) throw ft::Unsupported("ch04: too many blocks for one grid: " + p.describe());
  return int(blocks);
}


template <int D>
void launch_simple(const ft::Problem& p, const ft::ForwardArgs& a, cudaStream_t stream) {
  // Dynamic shared memory above 48 KB must be asked for, once per kernel (launch.cuh).
  ft::allow_dynamic_smem(fused_forward_simple_kernel<D>, simple_smem_bytes<D>(), "ch04 simple");
  fused_forward_simple_kernel<D><<<grid_blocks(p, kSimpleBr), kSimpleBr, simple_smem_bytes<D>(),
                                   stream>>>(a.Q, a.K, a.V, a.O, a.lse, p.len_q,
                                             ceil_div(p.len_q, kSimpleBr), p.causal,
                                             p.softmax_scale() * ft::kLog2e);
  CUDA_CHECK_LAUNCH();
}

// The instances compiled: float32 (the CUDA cores' type) at three head dims; the
// registrations below list what this grid holds.
using Compiled = ft::Instances<ft::DTypes<ft::DType::Float32>, ft::HeadDims<32, 64, 128>>;

void run_simple(const ft::Problem& p, const ft::ForwardArgs& a, cudaStream_t stream) {
  Compiled::dispatch(p, "ch04 simple", [&](auto i) { launch_simple<decltype(i)::kHeadDim>(p, a, stream); });
}

template <class T>
void launch_fast(const ft::Problem& p, const ft::ForwardArgs& a, cudaStream_t stream) {
  ft::allow_dynamic_smem(fused_forward_kernel<T>, T::kSmemBytes, "ch04 fast");
  fused_forward_kernel<T><<<grid_blocks(p, T::Br), T::kThreads, T::kSmemBytes, stream>>>(
      a.Q, a.K, a.V, a.O, a.lse, p.len_q, ceil_div(p.len_q, T::Br), p.causal,
      p.softmax_scale() * ft::kLog2e);
  CUDA_CHECK_LAUNCH();
}

// The tile shapes registered as variants: `fast` (kFastBr × kFastBc, fused_forward.hpp:
// 128×32) and fast_<Br>x<Bc>. TC (threads per row) is 8 where that keeps the output
// micro-tile at 8×(d/8) registers; 64-row tiles use 16 so that a block still has 128
// threads, and 128×64 at d = 128 uses 16 to keep the 8×8 score tile next to an 8×8 output
// tile (256 threads).
template <int D> using DefaultTiles = FastTiles<D, kFastBr, kFastBc, 8>;
template <int D> using Tiles128x64 = FastTiles<D, 128, 64, D == 128 ? 16 : 8>;
template <int D> using Tiles64x64 = FastTiles<D, 64, 64, 16>;
template <int D> using Tiles64x32 = FastTiles<D, 64, 32, 16>;

template <template <int> class Tiles>
void run_fast(const ft::Problem& p, const ft::ForwardArgs& a, cudaStream_t stream) {
  Compiled::dispatch(p, "ch04 fast", [&](auto i) { launch_fast<Tiles<decltype(i)::kHeadDim>>(p, a, stream); });
}

// ---------------------------------------------------------------------------------------
// Ledgers and implementations
// ---------------------------------------------------------------------------------------

std::vector<ft::KernelTraffic> traffic_simple(const ft::Problem& p) {
  return {ft::fused_forward_traffic(p, "fused_forward_simple_kernel", kSimpleBr, kSimpleBc)};
}

template <template <int> class Tiles>
std::vector<ft::KernelTraffic> traffic_fast(const ft::Problem& p) {
  std::vector<ft::KernelTraffic> out;
  Compiled::dispatch(p, "ch04 fast", [&](auto i) {
    using T = Tiles<decltype(i)::kHeadDim>;
    out = {ft::fused_forward_traffic(p, "fused_forward_kernel", T::Br, T::Bc)};
  });
  return out;
}

size_t no_workspace(const ft::Problem&) { return 0; }

template <template <int> class Tiles>
ft::ForwardImpl fast_impl(const std::string& variant, const std::string& what) {
  return {"04", variant, what, Compiled::head_dims(), no_workspace, run_fast<Tiles>,
          traffic_fast<Tiles>, Compiled::dtypes()};
}

}  // namespace

const ft::ForwardImpl& simple() {
  static const ft::ForwardImpl impl{
      "04", "simple", "fused: a thread per query row, K/V tiles in shared memory, online softmax",
      Compiled::head_dims(), no_workspace, run_simple, traffic_simple, Compiled::dtypes()};
  return impl;
}

const ft::ForwardImpl& fast() {
  static const ft::ForwardImpl impl = fast_impl<DefaultTiles>(
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

FT_REGISTER(ch04) {
  for (const auto& impl : ch04::forward_impls()) {
    const bool fast = impl.variant == ch04::fast().variant;
    ft::register_forward(impl, /*headline=*/fast, /*tour=*/fast || impl.variant == "simple");
  }
}
