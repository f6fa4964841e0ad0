// Chapter 07: FlashAttention-2's fused forward on the tensor cores, as a staircase of
// variants that each change one thing (flash_forward.cuh is the kernel, forward_traits.cuh
// the knobs):
//
//   plain     the fused kernel with dense, unswizzled tiles: every ldmatrix phase reads 8
//             rows that start in the same bank group (8-way conflicts); plain loads, one
//             K/V buffer
//   padded    the same with rows padded by 16 bytes: the 8 rows land in 8 bank groups
//   swizzled  the same with dense rows whose 16-byte chunks are swizzled (sm80/swizzle.hpp):
//             conflict-free ldmatrix without the padding's extra bytes
//   async     cp.async double buffering: K/V tile j+1 is copied while tile j is computed
//   tuned         the async kernel with 128-row query tiles, 4 warps of 32 rows
//   lazy_rescale  tuned, with O's rescale skipped in the tiles that raise no row's max
//
// and `fastest`, the faster of the last two per head dimension (the C API's alias "ch07"),
// plus `async_<Br>x<Bc>_w<W>` shapes that the tuning measured (registered for the timing).
#include <climits>
#include <type_traits>
#include <string>

#include "harness/traffic.hpp"
#include "07_tensor_core_forward/flash_forward.cuh"
#include "07_tensor_core_forward/flash_forward.hpp"
#include "harness/registry.hpp"
#include "core/check.cuh"
#include "device/dispatch.cuh"
#include "device/launch.cuh"

namespace ch07 {
namespace {

using ft::tc::PaddedTile;
using ft::tc::PlainTile;
using ft::tc::SwizzledTile;

/// The architecture every kernel here needs: mma.sync with bf16 (sm_80) and cp.async (sm_80).
constexpr int kMinSm = 80;

template <class Tr>
void launch(const ft::Problem& p, const ft::ForwardArgs& a, cudaStream_t stream) {
  using T = typename Tr::T;
  ft::require_sm(kMinSm, "chapter 07");
  ft::allow_dynamic_smem(flash_forward_tc<Tr>, Tr::kSmemBytes, "chapter 07 forward");
  const int num_q_tiles = (p.len_q + Tr::Br - 1) / Tr::Br;
  const int64_t blocks = int64_t(num_q_tiles) * p.heads_total();  // grid.x: up to 2^31 − 1
  if (blocks > INT_MAX) throw ft::Unsupported("chapter 07: too many blocks for one grid");
  const Params<T> params{a.Q.as<T>(), a.K.as<T>(), a.V.as<T>(), a.O.as<T>(), a.lse,
                         p.len_kv,    num_q_tiles, p.causal,   p.softmax_scale() * ft::kLog2e};
  const ft::ViewArgs views{ft::layout_of(p, a.layout), p.heads_q, p.heads_kv};
  const KeyValueArgs kv{p.len_q, p.group(), p.causal_offset()};
  flash_forward_tc<Tr><<<int(blocks), Tr::kThreads, Tr::kSmemBytes, stream>>>(params, views, kv);
  CUDA_CHECK_LAUNCH();
}

/// Contiguous tensors: Tr's kernel; views: ft::Views<Tr>'s; two lengths or grouped heads:
/// KeyValue<Tr>'s (with views, ft::Views<KeyValue<Tr>>'s). Only `fastest` (kFastest)
/// instantiates the last three; the staircase computes self-attention on contiguous tensors.
template <class Tr, bool kFastest>
void launch_layout(const ft::Problem& p, const ft::ForwardArgs& a, cudaStream_t stream) {
  const bool key_value = !p.same_lengths() || p.grouped();
  if constexpr (kFastest) {
    if (key_value) {
      if (a.layout == nullptr) return launch<KeyValue<Tr>>(p, a, stream);
      return launch<ft::Views<KeyValue<Tr>>>(p, a, stream);
    }
    if (a.layout != nullptr) return launch<ft::Views<Tr>>(p, a, stream);
  }
  if (key_value)
    throw ft::Unsupported("chapter 07: this variant computes len_q = len_kv and heads_q = heads_kv "
                          "only (fastest computes two lengths and grouped heads)");
  if (a.layout == nullptr) return launch<Tr>(p, a, stream);
  throw ft::Unsupported("chapter 07: this variant reads contiguous tensors only (fastest reads views)");
}

// The instances compiled: the tensor cores' two 16-bit types at the two head dims whose
// tiles the mma shapes divide; the registrations list what this grid holds.
using Compiled = ft::Instances<ft::DTypes<ft::DType::BFloat16, ft::DType::Float16>,
                               ft::HeadDims<64, 128>>;

/// A variant: for each (dtype, d), which traits. Shape<T, D> names the ForwardTraits.
template <template <class, int> class Shape, bool kFastest = false>
void run(const ft::Problem& p, const ft::ForwardArgs& a, cudaStream_t stream) {
  // The kernel takes each row's max on the raw scores and scales it once, which is right
  // for a positive scale only (as in FlashAttention).
  if (!(p.softmax_scale() > 0.f))
    throw ft::Unsupported("chapter 07: the softmax scale must be positive");
  if (a.layout) ft::check_layout(p, *a.layout, false);  // views: rows aligned, O disjoint
  Compiled::dispatch(p, "chapter 07", [&](auto i) {
    using I = decltype(i);
    launch_layout<Shape<typename I::Element, I::kHeadDim>, kFastest>(p, a, stream);
  });
}

// The staircase. 64 query rows and 4 warps (16 rows each) with 64-key tiles: the smallest
// shape where every warp does whole mma tiles and a block still has 4 warps to share K/V.
template <class T, int D> using Plain = ForwardTraits<T, D, 64, 64, 4, PlainTile, Copy::kSync>;
template <class T, int D> using Padded = ForwardTraits<T, D, 64, 64, 4, PaddedTile, Copy::kSync>;
template <class T, int D> using Swizzled = ForwardTraits<T, D, 64, 64, 4, SwizzledTile, Copy::kSync>;
template <class T, int D> using Async = ForwardTraits<T, D, 64, 64, 4, SwizzledTile, Copy::kAsync>;

// Shapes for the tuning sweep: <Br>x<Bc>, W warps.
template <int Br, int Bc, int W>
struct AsyncShape {
  template <class T, int D>
  using type = ForwardTraits<T, D, Br, Bc, W, SwizzledTile, Copy::kAsync>;
};
// The tuned tile shape (from the sweep in the README): 128 query rows, 4 warps of 32 rows,
// so each K/V fragment read from shared memory feeds two mma tiles; 64-key tiles, which
// keep S (64 floats a lane) and O (64 at d = 64, 128 at d = 128) in registers.
template <class T, int D>
using Tuned = ForwardTraits<T, D, 128, 64, 4, SwizzledTile, Copy::kAsync>;
// The tuned kernel, skipping O's rescale in the tiles that raise no row's max.
template <class T, int D>
using Lazy = ForwardTraits<T, D, 128, 64, 4, SwizzledTile, Copy::kAsync, Rescale::kWhenRaised>;
template <class T, int D>
using Lazy128x32 = ForwardTraits<T, D, 128, 32, 4, SwizzledTile, Copy::kAsync, Rescale::kWhenRaised>;
// The fastest measured per d: the skipped rescale pays at d = 128 (128 multiplies a lane
// per tile saved) and costs a little at d = 64 (the vote is not free, and there is half as
// much O to skip), so d = 64 keeps the plain tuned kernel.
template <class T, int D>
using Fastest = std::conditional_t<D == 128, Lazy<T, D>, Tuned<T, D>>;

std::vector<ft::KernelTraffic> traffic_for(const ft::Problem& p, int Br, int Bc) {
  return {ft::fused_forward_traffic(p, "flash_forward_tc", Br, Bc)};
}
template <template <class, int> class Shape>
std::vector<ft::KernelTraffic> traffic(const ft::Problem& p) {
  using Tr = Shape<__nv_bfloat16, 64>;  // Br and Bc are the same for every (T, D) here
  return traffic_for(p, Tr::Br, Tr::Bc);
}

size_t no_workspace(const ft::Problem&) { return 0; }

template <template <class, int> class Shape, bool kFastest = false>
ft::ForwardImpl impl(const std::string& variant, const std::string& what) {
  // Two lengths and grouped heads are an index each (flash_forward.cuh), in `fastest`'s own
  // instantiations (KeyValue<Traits>).
  const ft::Features features{/*lengths=*/kFastest, /*grouped=*/kFastest};
  return {"07",         variant,         what,
          Compiled::head_dims(),    no_workspace,    run<Shape, kFastest>,
          traffic<Shape>, Compiled::dtypes(), kMinSm, kFastest,
          features};
}

}  // namespace

const ft::ForwardImpl& fastest() {
  static const ft::ForwardImpl i =
      impl<Fastest, true>("fastest", "tuned (d=64) or lazy_rescale (d=128): the fastest measured");
  return i;
}

std::vector<ft::ForwardImpl> forward_impls() {
  return {impl<Plain>("plain", "fused on tensor cores: dense tiles, plain loads"),
          impl<Padded>("padded", "rows padded by 16 bytes: conflict-free ldmatrix"),
          impl<Swizzled>("swizzled", "dense rows, swizzled chunks: conflict-free, no padding"),
          impl<Async>("async", "cp.async double buffering of K/V"),
          impl<Tuned>("tuned", "cp.async + 128x64 tiles, 4 warps of 32 rows"),
          impl<Lazy>("lazy_rescale", "tuned, O rescaled only when a row's max rises"),
          impl<Lazy128x32>("lazy_128x32_w4", "lazy_rescale, Br=128 Bc=32, 4 warps"),
          fastest(),
          impl<AsyncShape<128, 64, 8>::type>("async_128x64_w8", "async, Br=128 Bc=64, 8 warps"),
          impl<AsyncShape<128, 128, 8>::type>("async_128x128_w8", "async, Br=128 Bc=128, 8 warps"),
          impl<AsyncShape<64, 128, 4>::type>("async_64x128_w4", "async, Br=64 Bc=128, 4 warps"),
          impl<AsyncShape<128, 32, 4>::type>("async_128x32_w4", "async, Br=128 Bc=32, 4 warps")};
}

}  // namespace ch07

FT_REGISTER(ch07) {
  for (const auto& impl : ch07::forward_impls()) {
    const bool fastest = impl.variant == ch07::fastest().variant;
    ft::register_forward(impl, /*headline=*/fastest, /*tour=*/fastest);
  }
}
