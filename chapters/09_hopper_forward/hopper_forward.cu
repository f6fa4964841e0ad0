// Chapter 09's forward implementations: the staircase onto Hopper's instructions, their
// launch (one instance per dtype and d), their ledger and their registration.
#include "09_hopper_forward/hopper_forward.hpp"

#include <algorithm>
#include <climits>
#include <string>

#include "09_hopper_forward/specialized_forward.cuh"
#include "09_hopper_forward/wgmma_forward.cuh"
#include "core/check.cuh"
#include "device/dispatch.cuh"
#include "device/launch.cuh"
#include "harness/registry.hpp"
#include "harness/traffic.hpp"
#include "sm90/tma.hpp"

namespace ch09 {
namespace {

/// wgmma and its sm_90a machine code: Hopper, and only Hopper.
constexpr int kSm = 90;

// The instances compiled: the two 16-bit types at the two head dims wgmma's n covers here.
using Compiled = ft::Instances<ft::DTypes<ft::DType::BFloat16, ft::DType::Float16>,
                               ft::HeadDims<64, 128>>;

// Step 1, wgmma: 128 query rows (two warpgroups of 64) and 128-key tiles at both d: S is
// 64 registers a thread, O 32 (d = 64) or 64 (d = 128).
template <class T, int D> using Wgmma = WgmmaTraits<T, D, 128>;
// Step 2, tma: the same tiles, brought by the copy engine.
template <class T, int D> using Tma = WgmmaTraits<T, D, 128, Load::kTma>;
// Step 3, warp_specialized: a producer warpgroup, two consumers, three stages.
template <class T, int D> using WarpSpecialized = SpecializedTraits<T, D, Schedule::kFree>;
// Step 4, pingpong: the consumers take turns at the tensor cores.
template <class T, int D> using PingPong = SpecializedTraits<T, D, Schedule::kPingPong>;
// Step 5, overlap: and within each consumer, the next softmax under the current P·V.
template <class T, int D> using Overlap = SpecializedTraits<T, D, Schedule::kOverlap>;
// Step 6, persistent: overlap, a block an SM walking the query tiles.
template <class T, int D> using Persistent = SpecializedTraits<T, D, Schedule::kOverlap, true>;
// Step 7, wide / wide_persistent (d = 64 only: the registers allow three consumers there):
// steps 5 and 6 with three consumers, 192 query rows.
using CompiledD64 = ft::Instances<ft::DTypes<ft::DType::BFloat16, ft::DType::Float16>, ft::HeadDims<64>>;
template <class T, int D> using Wide = SpecializedTraits<T, D, Schedule::kOverlap, false, 3, 3>;
template <class T, int D> using WidePersistent = SpecializedTraits<T, D, Schedule::kOverlap, true, 3, 3>;
/// fastest: persistent, and at d = 64 with three consumers once a head has this many query
/// rows. Below it the 192-row tiles fill the SMs in too few rounds, with a ragged last tile
/// (N_q = 1024 is 5⅓ of them): at B = 8, H = 12, N = 1024, causal, the two-consumer kernel
/// measured 0.95x cuDNN and the three-consumer one 0.64x (ch09_vs_pytorch.csv).
constexpr int kWideMinRows = 2048;
/// The kernel a traits struct describes.
template <class Tr>
constexpr auto kernel() {
  if constexpr (Tr::kSpecialized) return specialized_forward<Tr>;
  else return wgmma_forward<Tr>;
}

template <class Tr>
void launch(const ft::Problem& p, const ft::ForwardArgs& a, cudaStream_t stream) {
  using T = typename Tr::T;
  ft::require_arch(kSm, "chapter 09");
  ft::allow_dynamic_smem(kernel<Tr>(), Tr::kSmemBytes, "chapter 09 forward");
  const int num_q_tiles = (p.len_q + Tr::Br - 1) / Tr::Br;
  const int64_t blocks = int64_t(num_q_tiles) * p.heads_total();
  // Tiles are counted in ints, pairs of them past the last one included.
  if (blocks > INT_MAX / 2) throw ft::Unsupported("chapter 09: too many query tiles for one launch");
  const Params<T> params{a.Q.as<T>(), a.K.as<T>(), a.V.as<T>(), a.O.as<T>(), a.lse,
                         p.len_q, p.len_kv, num_q_tiles, int(blocks), p.group(), p.causal_offset(),
                         p.causal, p.softmax_scale() * ft::kLog2e};
  const ft::Layout layout = ft::layout_of(p, a.layout);
  const ft::ViewArgs views{layout, p.heads_q, p.heads_kv};
  CUtensorMap maps[3] = {};  // Q, K, V: read by the TMA kernels only
  if constexpr (Tr::kLoad == Load::kTma) {
    maps[0] = ft::sm90::tensor_map(a.Q.get(), p.dtype, p.batch, p.heads_q, p.len_q, Tr::D, layout.Q, Tr::Br);
    maps[1] = ft::sm90::tensor_map(a.K.get(), p.dtype, p.batch, p.heads_kv, p.len_kv, Tr::D, layout.K, Tr::Bc);
    maps[2] = ft::sm90::tensor_map(a.V.get(), p.dtype, p.batch, p.heads_kv, p.len_kv, Tr::D, layout.V, Tr::Bc);
  }
  // A block a query tile; persistent (step 6): a block an SM (one fits: its shared memory),
  // each walking pairs of query tiles (TileOrder), or fewer blocks when there are fewer pairs.
  int64_t grid = blocks;
  if constexpr (Tr::kSpecialized) {
    if (Tr::kPersistent) grid = std::min<int64_t>(pairs_per_head(num_q_tiles) * p.heads_total(), ft::sm_count());
  }
  kernel<Tr>()<<<int(grid), Tr::kThreads, Tr::kSmemBytes, stream>>>(params, views, maps[0], maps[1], maps[2]);
  CUDA_CHECK_LAUNCH();
}

template <template <class, int> class Shape, class Set = Compiled>
void run(const ft::Problem& p, const ft::ForwardArgs& a, cudaStream_t stream) {
  // The max is taken on raw scores and scaled once: right for a positive scale only.
  if (!(p.softmax_scale() > 0.f)) throw ft::Unsupported("chapter 09: the softmax scale must be positive");
  if (a.layout) ft::check_layout(p, *a.layout, false);  // views: rows 16-byte aligned, O disjoint
  Set::dispatch(p, "chapter 09", [&](auto i) {
    using I = decltype(i);
    launch<Shape<typename I::Element, I::kHeadDim>>(p, a, stream);
  });
}

template <template <class, int> class Shape, class Set = Compiled>
std::vector<ft::KernelTraffic> traffic(const ft::Problem& p) {
  std::vector<ft::KernelTraffic> t;
  Set::dispatch(p, "chapter 09", [&](auto i) {  // the tile shape may depend on d (fastest's does)
    using I = decltype(i);
    using Tr = Shape<typename I::Element, I::kHeadDim>;
    t = {ft::fused_forward_traffic(p, Tr::kSpecialized ? "specialized_forward" : "wgmma_forward", Tr::Br, Tr::Bc)};
  });
  return t;
}

size_t no_workspace(const ft::Problem&) { return 0; }

bool fastest_is_wide(const ft::Problem& p) { return p.head_dim == 64 && p.len_q >= kWideMinRows; }

/// Whether the persistent kernel would have a pair of query tiles for every SM. With fewer
/// (a small batch, short sequences: 64 pairs for 32 heads of 512 queries), its grid would
/// leave SMs idle that a block a tile would fill: there the same kernel without the
/// persistent grid (step 5, or `wide`) runs instead.
bool fills_the_gpu(const ft::Problem& p, int rows_a_tile) {
  return pairs_per_head((p.len_q + rows_a_tile - 1) / rows_a_tile) * p.heads_total() >= ft::sm_count();
}

void run_fastest(const ft::Problem& p, const ft::ForwardArgs& a, cudaStream_t stream) {
  if (fastest_is_wide(p)) {
    if (fills_the_gpu(p, WidePersistent<__nv_bfloat16, 64>::Br)) run<WidePersistent, CompiledD64>(p, a, stream);
    else run<Wide, CompiledD64>(p, a, stream);
  } else {
    if (fills_the_gpu(p, Persistent<__nv_bfloat16, 64>::Br)) run<Persistent>(p, a, stream);
    else run<Overlap>(p, a, stream);
  }
}

std::vector<ft::KernelTraffic> traffic_fastest(const ft::Problem& p) {
  return fastest_is_wide(p) ? traffic<WidePersistent, CompiledD64>(p) : traffic<Persistent>(p);
}

ft::ForwardImpl make_impl(const std::string& variant, const std::string& what, std::vector<int> head_dims,
                          ft::ForwardFn run_fn, ft::TrafficFn traffic_fn) {
  return ft::ForwardImpl{"09", variant, what, std::move(head_dims), no_workspace, run_fn, traffic_fn,
                         Compiled::dtypes(), kSm, /*strided=*/true, ft::Features{/*lengths=*/true, /*grouped=*/true}};
}

template <template <class, int> class Shape, class Set = Compiled>
ft::ForwardImpl impl(const std::string& variant, const std::string& what) {
  return make_impl(variant, what, Set::head_dims(), run<Shape, Set>, traffic<Shape, Set>);
}

}  // namespace

const ft::ForwardImpl& fastest() {
  // The top of the staircase: persistent; at d = 64, where the registers allow three
  // consumers and the exponentials want the warps, wide_persistent when N_q >= 2048; a
  // block a tile (overlap, wide) when there are fewer pairs of tiles than SMs.
  static const ft::ForwardImpl i = make_impl("fastest", "persistent; wide_persistent at d = 64, N_q >= 2048",
                                             Compiled::head_dims(), run_fastest, traffic_fastest);
  return i;
}

std::vector<ft::ForwardImpl> forward_impls() {
  return {impl<Wgmma>("wgmma", "S = QK^T and O += PV on wgmma (warpgroups of 4 warps); cp.async loads"),
          impl<Tma>("tma", "wgmma, Q/K/V tiles by the copy engine (TMA) on an mbarrier a stage"),
          impl<WarpSpecialized>("warp_specialized", "tma, a producer warpgroup (setmaxnreg 24) and two consumers (240)"),
          impl<PingPong>("pingpong", "warp_specialized, the consumers taking turns at the tensor cores"),
          impl<Overlap>("overlap", "pingpong, each consumer's next softmax under its own P·V"),
          impl<Persistent>("persistent", "overlap, a block an SM: the next tile's copies under this one's output"),
          impl<Wide, CompiledD64>("wide", "overlap with three consumers, 192 query rows (d = 64)"),
          impl<WidePersistent, CompiledD64>("wide_persistent", "persistent with three consumers (d = 64)"),
          fastest()};
}

}  // namespace ch09

FT_REGISTER(ch09) {
  for (const auto& impl : ch09::forward_impls()) {
    const bool fastest = impl.variant == ch09::fastest().variant;
    ft::register_forward(impl, /*headline=*/fastest, /*tour=*/fastest);
  }
}
