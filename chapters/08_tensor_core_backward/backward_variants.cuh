/// @file backward_variants.cuh
/// @brief Chapter 08's variants as the library runs them: for each variant and (dtype, d),
/// the launches of D's kernel, the key-block kernel (flash_backward_tc.cuh's, or
/// flash_backward_warp_tiles.cuh's for warp_tiles and the variants after it) and dQ's
/// conversion or pass; the workspace and the ledger; impl<Variant>(), the BackwardImpl of
/// one variant. The variants are instantiated in four files of their own
/// (staircase_*.cu), so that the chapter's kernels compile in parallel; tensor_core_backward.cu
/// lists them.
#pragma once

#include "08_tensor_core_backward/tensor_core_backward.hpp"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <string>
#include <type_traits>

#include "harness/traffic.hpp"
#include "07_tensor_core_forward/flash_forward.hpp"
#include "08_tensor_core_backward/flash_backward_tc.cuh"
#include "08_tensor_core_backward/flash_backward_warp_tiles.cuh"
#include "core/check.cuh"
#include "device/dispatch.cuh"
#include "device/launch.cuh"

namespace ch08::detail {

/// mma.sync with bf16 and fp16 operands (and cp.async): sm_80.
constexpr int kMinSm = 80;

// The staircase. Each variant changes one thing from the one before it.
//
// plain: 64 keys a block, 4 warps (16 keys each), 64 queries a tile at d = 64 and 32 at
// d = 128, where dK and dV take 128 registers a lane and 64 queries of Sᵀ and dPᵀ on top
// spilled (ptxas -v); 32 queries halve those to 16 registers each.
constexpr int br_for(int d) { return d == 128 ? 32 : 64; }
template <int Bc, int W, Copy C, DQ Q = DQ::kAtomics, int Br64 = 64, int Br128 = 32>
struct Shape {
  template <class T, int D>
  using type = BackwardTraits<T, D, D == 128 ? Br128 : Br64, Bc, W, C, Q>;
};
template <class T, int D> using Plain = Shape<64, 4, Copy::kSync>::type<T, D>;
// wide_kv: 128 keys a block, 8 warps. Each query tile is loaded, and dQ's share added by
// atomics, once per 128 keys instead of per 64: half the L2 traffic of both.
template <class T, int D> using WideKv = Shape<128, 8, Copy::kSync>::type<T, D>;
// async: wide_kv, the next query tile (Q, dO, L, D) copied by cp.async while this one is
// used: one barrier fewer per tile and no wait for the copy.
template <class T, int D> using Async = Shape<128, 8, Copy::kAsync>::type<T, D>;
// dq_pass: async's key blocks without the dQ product; dQ from a second kernel per query
// tile that recomputes S and dP (3 products more, no atomics, no float32 accumulator).
template <class T, int D> using DqPass = Shape<128, 8, Copy::kAsync, DQ::kSeparatePass>::type<T, D>;
// The dQ pass's tiles: 64 queries (4 warps of 16) and 64 keys, as chapter 07's plain forward.
template <class T, int D> using DqPassKernel = DqTraits<T, D, 64, 64>;
// Tile-shape sweep around async: 32 queries at d = 64 too; 64 keys with 4 warps.
template <class T, int D> using AsyncBr32 = Shape<128, 8, Copy::kAsync, DQ::kAtomics, 32, 32>::type<T, D>;
template <class T, int D> using AsyncBc64 = Shape<64, 4, Copy::kAsync>::type<T, D>;
// warp_tiles: async's pipeline with Pᵀ and dSᵀ through shared memory, every product split
// over the 8 warps in tiles 32 rows tall; 128 queries a tile at d = 64, 64 at d = 128. Then
// six steps on its kernel, each one flag more (the table in flash_backward_warp_tiles.cuh).
template <class T, int D> using WarpTiles = StepTraits<T, D, Step::kWarpTiles>;
template <class T, int D> using Hoisted = StepTraits<T, D, Step::kHoisted>;
template <class T, int D> using SpreadAtomics = StepTraits<T, D, Step::kSpreadAtomics>;
template <class T, int D> using PipelinedDk = StepTraits<T, D, Step::kPipelinedDk>;
template <class T, int D> using LateCopy = StepTraits<T, D, Step::kLateCopy>;
template <class T, int D> using DqPointer = StepTraits<T, D, Step::kDqPointer>;
template <class T, int D> using SplitTail = StepTraits<T, D, Step::kSplitTail>;
// fastest: split_tail at both d (tc_variants.csv, bf16, N = 4096 and 16384: 2.1-2.9% ahead
// of dq_pointer non-causal; causal, where it cuts nothing, -0.3% to +0.5%: README,
// "Measured on the H200").
template <class T, int D> using Fastest = SplitTail<T, D>;
static_assert(std::is_same_v<Fastest<__nv_bfloat16, 64>, SplitTail<__nv_bfloat16, 64>>,
              "fastest_variant names split_tail: keep the two together");

/// Whether a variant's traits are warp_tiles' family (its kernel), or BackwardTraits.
template <class Tr>
constexpr bool kWarpTileKernel = std::is_base_of_v<WarpTileTraits<typename Tr::T, Tr::D>, Tr>;

/// The key-block kernel of a variant's traits: one kernel template per traits family.
template <class Tr>
auto key_block_kernel() {
  if constexpr (kWarpTileKernel<Tr>)
    return flash_backward_warp_tiles<Tr>;
  else
    return flash_backward_tc<Tr>;
}

/// split_tail's plan for a problem on a GPU of `sms` SMs (tail_split.hpp): the launch asks
/// for the current GPU's (ft::sm_count), the ledger for the model's (ft::gpu_facts: the
/// H200's without a GPU); the workspace holds room for any plan (slot_capacity). Without kSplitTail, or with 0 SMs, every key
/// tile its own block.
template <class Tr>
constexpr bool kSplitsTail = [] {
  if constexpr (kWarpTileKernel<Tr>) return Tr::kSplitTail;
  else return false;
}();

/// A problem's key tiles (one block each before split_tail) and each one's query tiles.
template <class Tr>
int64_t key_tiles(const ft::Problem& p) { return int64_t((p.len_q + Tr::Bc - 1) / Tr::Bc) * p.heads_total(); }
template <class Tr>
int query_tiles(const ft::Problem& p) { return (p.len_q + Tr::Br - 1) / Tr::Br; }

template <class Tr>
TailSplit split_plan(const ft::Problem& p, int sms) {
  return plan_tail_split(key_tiles<Tr>(p), query_tiles<Tr>(p), kSplitsTail<Tr> ? sms : 0, p.causal, Tr::Bc, Tr::D);
}

/// The floats of the slots a plan uses: one slot a cut tile.
inline int64_t slot_floats(const TailSplit& s) { return s.slot_count() * s.slot_floats; }

/// D's floats rounded up to 4, so that what follows D is 16-byte aligned.
inline int64_t padded_rows(const ft::Problem& p) { return (p.rows() + 3) / 4 * 4; }

/// The workspace. With dQ by atomics: [dQ accumulator: rows·d floats | D: rows floats, padded
/// to 4 | split_tail's slots], the accumulator first, at the workspace's own (16-byte)
/// alignment, for its float2 atomics, and the slots 16-byte aligned after D for theirs. With
/// a separate dQ pass: D alone.
struct Workspace {
  float* dq_acc;  ///< null with a separate dQ pass
  float* D;
  float* slots;   ///< split_tail's cut tiles (variant_workspace_bytes holds room for them)
  Workspace(const ft::Problem& p, void* ws, bool atomics) {
    dq_acc = atomics ? static_cast<float*>(ws) : nullptr;
    D = static_cast<float*>(ws) + (atomics ? p.elems() : 0);
    slots = D + padded_rows(p);
  }
};

template <class Tr>
void launch(const ft::Problem& p, const ft::BackwardArgs& a, cudaStream_t stream) {
  using T = typename Tr::T;
  constexpr bool kAtomics = Tr::kDq == DQ::kAtomics;
  using DqTr = DqPassKernel<T, Tr::D>;
  ft::require_sm(kMinSm, "chapter 08");
  const auto kernel = key_block_kernel<Tr>();
  ft::allow_dynamic_smem(kernel, Tr::kSmemBytes, "chapter 08 backward");
  if constexpr (!kAtomics)
    ft::allow_dynamic_smem(flash_backward_dq_tc<DqTr>, DqTr::kSmemBytes, "chapter 08 dQ pass");
  const int num_kv_tiles = (p.len_q + Tr::Bc - 1) / Tr::Bc;
  const int num_q_tiles = (p.len_q + DqTr::Br - 1) / DqTr::Br;
  const int64_t blocks = int64_t(num_kv_tiles) * p.heads_total();  // grid.x: up to 2^31 − 1
  const int64_t dq_blocks = int64_t(num_q_tiles) * p.heads_total();
  if (blocks > INT_MAX || dq_blocks > INT_MAX)
    throw ft::Unsupported("chapter 08: too many blocks for one grid");
  const int64_t rows = p.rows();
  const int64_t d_blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  if (d_blocks > INT_MAX) throw ft::Unsupported("chapter 08: too many rows for one launch");
  TailSplit split = split_plan<Tr>(p, ft::sm_count());
  const int64_t slots = slot_floats(split);  // at most the workspace's room: kMaxCutTiles
  const Workspace w(p, a.workspace, kAtomics);
  split.slots = w.slots;
  const int64_t grid = split.blocks();  // `blocks` when nothing is cut
  if (grid > INT_MAX) throw ft::Unsupported("chapter 08: too many blocks for one grid");

  constexpr bool kViews = Tr::kViews;
  static_assert(!kViews || kAtomics, "the separate dQ pass (flash_backward_dq_tc) reads contiguous tensors only");
  const ft::Layout l = ft::layout_of(p, a.layout);
  dot_dO_O_tc<T, kViews><<<int(d_blocks), kSmallBlock, 0, stream>>>(
      a.O.as<T>(), l.O, a.dO.as<T>(), l.dO, w.D, w.dq_acc, rows, p.len_q, p.heads_q, p.head_dim);
  CUDA_CHECK_LAUNCH();

  const Params<T> params{a.Q.as<T>(), a.K.as<T>(),  a.V.as<T>(),  a.dO.as<T>(),
                         a.lse,       w.D,          w.dq_acc,     a.dK.as<T>(),
                         a.dV.as<T>(), p.len_q,   num_kv_tiles, p.causal,
                         p.softmax_scale(), p.softmax_scale() * ft::kLog2e};
  const ft::ViewArgs views{l, p.heads_q, p.heads_kv};
  if constexpr (kWarpTileKernel<Tr>) {
    if (slots > 0) CUDA_CHECK(cudaMemsetAsync(w.slots, 0, size_t(slots) * sizeof(float), stream));
    kernel<<<int(grid), Tr::kThreads, Tr::kSmemBytes, stream>>>(params, split, views);
    CUDA_CHECK_LAUNCH();
    if (slots > 0) {
      store_shared_tiles<T, Tr::D, Tr::Bc, kViews><<<int(split.tiles), kSmallBlock, 0, stream>>>(params, split, views);
      CUDA_CHECK_LAUNCH();
    }
  } else {
    kernel<<<int(blocks), Tr::kThreads, Tr::kSmemBytes, stream>>>(params, views);
    CUDA_CHECK_LAUNCH();
  }

  if constexpr (kAtomics) {
    // A grid-stride loop: a few waves of blocks whatever the size.
    const int64_t n = kViews ? p.elems() / kConvertElems : p.elems();  // threads' items
    const int c_blocks = int(std::min<int64_t>((n + kSmallBlock - 1) / kSmallBlock, 1 << 16));
    if constexpr (kViews)
      convert_dq_views<T, Tr::D><<<c_blocks, kSmallBlock, 0, stream>>>(w.dq_acc, a.dQ.as<T>(), l.dQ,
                                                                       rows, p.len_q, p.heads_q);
    else
      convert_dq<T><<<c_blocks, kSmallBlock, 0, stream>>>(w.dq_acc, a.dQ.as<T>(), n);
  } else {
    flash_backward_dq_tc<DqTr><<<int(dq_blocks), DqTr::kThreads, DqTr::kSmemBytes, stream>>>(
        params, a.dQ.as<T>(), num_q_tiles);
  }
  CUDA_CHECK_LAUNCH();
}

// The instances every variant compiles: the tensor cores' two 16-bit types at the two head
// dims whose tiles the mma shapes divide; the registrations list what this grid holds.
using Compiled = ft::Instances<ft::DTypes<ft::DType::BFloat16, ft::DType::Float16>,
                               ft::HeadDims<64, 128>>;

/// What every variant refuses before it touches the GPU: a dtype, head dim or alignment it
/// cannot serve (ft::Unsupported).
inline void check_args(const ft::Problem& p, const ft::BackwardArgs& a) {
  Compiled::dispatch(p, "chapter 08", [](auto) {});  // a pair not compiled throws
  for (const void* ptr : {a.Q.get(), a.K.get(), a.V.get(), a.dO.get(), static_cast<const void*>(a.workspace)})
    if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0)
      throw ft::Unsupported("chapter 08: tensors and workspace must be 16-byte aligned");
  if (a.layout) {  // views: rows aligned, outputs disjoint; dQ's rows get 16-byte stores
    for (const void* ptr : {a.O.get(), static_cast<const void*>(a.dQ.get()),
                            static_cast<const void*>(a.dK.get()), static_cast<const void*>(a.dV.get())})
      if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0)
        throw ft::Unsupported("chapter 08: views must start 16-byte aligned");
    ft::check_layout(p, *a.layout, true);
  }
}

/// Contiguous tensors: Tr's kernels; views: ft::Views<Tr>'s, which only the variants that
/// take views (kTakesViews: fastest, and the two it runs, split_tail and async_bc64)
/// instantiate.
template <class Tr, bool kTakesViews>
void launch_layout(const ft::Problem& p, const ft::BackwardArgs& a, cudaStream_t stream) {
  if (a.layout == nullptr) return launch<Tr>(p, a, stream);
  if constexpr (kTakesViews) return launch<ft::Views<Tr>>(p, a, stream);
  throw ft::Unsupported("chapter 08: this variant reads contiguous tensors only (fastest, "
                        "split_tail and async_bc64 read views)");
}

/// A variant: for each (dtype, d), which traits. Shape<T, D> names the traits.
/// The launch of a checked problem (check_args): its (dtype, d)'s instance.
template <template <class, int> class Shape, bool kTakesViews = false>
void launch_checked(const ft::Problem& p, const ft::BackwardArgs& a, cudaStream_t stream) {
  Compiled::dispatch(p, "chapter 08", [&](auto i) {
    using I = decltype(i);
    launch_layout<Shape<typename I::Element, I::kHeadDim>, kTakesViews>(p, a, stream);
  });
}

template <template <class, int> class Shape, bool kTakesViews = false>
void run(const ft::Problem& p, const ft::BackwardArgs& a, cudaStream_t stream) {
  check_args(p, a);
  launch_checked<Shape, kTakesViews>(p, a, stream);
}

// ---- Ledger pieces (chapter 05's flash ledger, with 2-byte tensors and a float32 dQ) -------

inline int n_tiles(int N, int tile) { return (N + tile - 1) / tile; }
inline double tile_rows(int N, int tile, int t) { return std::min(tile, N - t * tile); }

/// Key blocks (of Bc keys) that load query tile i (of Br queries): all; causal, those whose
/// first query tile floor(j·Bc/Br) is ≤ i, i.e. j < (i+1)·Br/Bc.
inline double blocks_visiting_query_tile(const ft::Problem& p, int i, int Br, int Bc) {
  const int n_kv = n_tiles(p.len_q, Bc);
  return p.causal ? std::min(n_kv, n_tiles((i + 1) * Br, Bc)) : n_kv;
}

inline ft::KernelTraffic dot_traffic(const ft::Problem& p, bool atomics) {
  const double in = 2 * double(p.q_bytes());                        // O, dO (2-byte)
  const double out = double(p.rows()) * ft::kFloatBytes +                // D
                     (atomics ? double(p.elems()) * ft::kFloatBytes : 0);  // accumulator zeros
  return {"dot_dO_O_tc", in, out, in, out, 2.0 * double(p.elems()),
          atomics ? "O, dO streamed once; D and the float32 dQ accumulator (zeros) written once"
                  : "O, dO streamed once; D written once"};
}

/// The key-block kernel: K, V in and dK, dV out once; every block reads the query tiles it
/// visits (Q, dO, L, D) and, with atomics, adds a float32 dQ share for each.
inline ft::KernelTraffic main_traffic(const ft::Problem& p, int Br, int Bc, bool atomics,
                               const char* kernel = "flash_backward_tc") {
  const int N = p.len_q;
  const double d = p.head_dim, bh = double(p.heads_total()), fb = ft::kFloatBytes;
  const double eb = double(ft::dtype_bytes(p.dtype));
  double q_rows_loaded = 0;  // Σ over query tiles of rows × key blocks loading them, per head
  for (int i = 0; i < n_tiles(N, Br); ++i)
    q_rows_loaded += tile_rows(N, Br, i) * blocks_visiting_query_tile(p, i, Br, Bc);
  const double kv = 2 * double(p.kv_bytes());  // K, V in; dK, dV out: once each
  ft::KernelTraffic t;
  t.kernel = kernel;
  t.read_bytes = kv + bh * q_rows_loaded * (2 * d * eb + 2 * fb);            // Q, dO; L, D
  t.write_bytes = kv + (atomics ? bh * q_rows_loaded * d * fb : 0.0);       // dQ atomics
  // The five products, 2·N²·d each (halved causal); without dQ's, four of them.
  t.flops = p.backward_flops() * (atomics ? 1.0 : 0.8);
  // What a head's key blocks (adjacent on the grid) re-read: its Q, dO, L, D (and dQ).
  const double per_head_reread = double(N) * (2 * d * eb + 2 * fb + (atomics ? d * fb : 0));
  const double acc = atomics ? double(p.elems()) * fb : 0.0;
  if (ft::fits_l2(per_head_reread)) {
    t.dram_read_bytes = 4 * double(p.q_bytes()) + 2 * double(p.rows()) * fb + acc;
    t.dram_write_bytes = kv + acc;
    t.note = atomics ? "Q,K,V,dO,L,D and the dQ accumulator read once; dK,dV,dQ(float32) "
                       "written once: re-reads and atomics stay in L2"
                     : "Q,K,V,dO,L,D read once; dK,dV written once: re-reads stay in L2";
  } else {
    t.dram_read_bytes = t.read_bytes;
    t.dram_write_bytes = t.write_bytes;
    t.note = "one head's Q,dO,dQ exceed the L2 share: every re-read counted (upper bound)";
  }
  return t;
}

inline ft::KernelTraffic convert_traffic(const ft::Problem& p) {
  const double in = double(p.elems()) * ft::kFloatBytes, out = double(p.q_bytes());
  return {"convert_dq", in, out, in, out, 0.0, "the float32 dQ read once, dQ written once"};
}

/// The dQ pass: chapter 04's forward ledger (Q-tile blocks re-reading K and V) with dO, L, D
/// read beside Q and dQ written in place of O; S, dP and dS·K: three products.
inline ft::KernelTraffic dq_pass_traffic(const ft::Problem& p, int Br, int Bc) {
  ft::KernelTraffic t = ft::fused_forward_traffic(p, "flash_backward_dq_tc", Br, Bc);
  const double extra = double(p.q_bytes()) + 2 * double(p.rows()) * ft::kFloatBytes;
  t.read_bytes += extra;       // dO once, L and D once (the forward read Q alone)
  t.dram_read_bytes += extra;
  t.write_bytes -= double(p.rows()) * ft::kFloatBytes;  // no lse written
  t.dram_write_bytes -= double(p.rows()) * ft::kFloatBytes;
  t.flops = p.backward_flops() * 0.6;
  t.note = "K,V re-read per query tile (as chapter 04's forward), Q,dO,L,D read once, dQ written once";
  return t;
}



inline size_t dq_pass_workspace_bytes(const ft::Problem& p) { return size_t(p.rows()) * sizeof(float); }

/// split_tail's cut tiles (a plan with parts): each part of a cut tile loads its K and V and
/// adds its share of dK, dV into the tile's slot (float32) instead of storing them;
/// store_shared_tiles, which runs before convert_dq, reads the slots and stores the cut
/// tiles' dK, dV. The slots' zeroing (a cudaMemsetAsync: no kernel of ours, so no line of its
/// own) writes slot_bytes more, said in the note. The plan is the model GPU's (gpu_facts:
/// device 0, or the H200 without a GPU), as the rest of the ledger.
inline void add_split_traffic(std::vector<ft::KernelTraffic>& t, const ft::Problem& p, const TailSplit& s) {
  const int64_t cut = s.slot_count();
  if (cut == 0) return;
  const double slot_bytes = double(cut) * double(s.slot_floats) * ft::kFloatBytes;
  const double kv_bytes = double(cut) * double(s.slot_floats) * double(ft::dtype_bytes(p.dtype));
  ft::KernelTraffic& main = t[1];
  main.read_bytes += (s.parts - 1) * kv_bytes;  // K and V again for every part after the first (L2)
  main.write_bytes += s.parts * slot_bytes - kv_bytes;  // each part's sums, not the tiles' dK, dV
  main.dram_write_bytes += slot_bytes - kv_bytes;       // the slots, once, when evicted
  const int shortest = s.q_tiles / s.parts, longest = (s.q_tiles + s.parts - 1) / s.parts;
  const std::string run = std::to_string(shortest) + (longest > shortest ? "-" + std::to_string(longest) : "");
  char zeroed[32];
  std::snprintf(zeroed, sizeof zeroed, "%.2f MB", slot_bytes / 1e6);
  t.insert(t.begin() + 2,
           {"store_shared_tiles", slot_bytes, kv_bytes, slot_bytes, kv_bytes, 0.0,
            "the slots read once, dK and dV written once, of the last wave's " + std::to_string(cut) +
                " key tiles (after " + std::to_string(s.first) + " whole ones), each cut into " +
                std::to_string(s.parts) + " runs of " + run + " query tiles; the slots' zeroing (" +
                zeroed + ", cudaMemsetAsync) is not in the table"});
}

/// The ledger of one (dtype-independent) instance: async's bytes with its tiles, named after
/// the kernel that moves them; a separate dQ pass moves none of the atomics' bytes.
template <class Tr>
std::vector<ft::KernelTraffic> traffic_of(const ft::Problem& p) {
  if constexpr (Tr::kDq == DQ::kSeparatePass) {
    return {dot_traffic(p, false), main_traffic(p, Tr::Br, Tr::Bc, false),
            dq_pass_traffic(p, DqPassKernel<__nv_bfloat16, 64>::Br, DqPassKernel<__nv_bfloat16, 64>::Bc)};
  } else {
    std::vector<ft::KernelTraffic> t{
        dot_traffic(p, true),
        main_traffic(p, Tr::Br, Tr::Bc, true, kWarpTileKernel<Tr> ? "flash_backward_warp_tiles" : "flash_backward_tc"),
        convert_traffic(p)};
    add_split_traffic(t, p, split_plan<Tr>(p, int(ft::gpu_facts().sms)));
    return t;
  }
}

template <template <class, int> class Variant>
std::vector<ft::KernelTraffic> traffic(const ft::Problem& p) {
  std::vector<ft::KernelTraffic> t;
  Compiled::dispatch(p, "chapter 08", [&](auto i) {
    using I = decltype(i);
    t = traffic_of<Variant<typename I::Element, I::kHeadDim>>(p);
  });
  return t;
}

/// One instance's workspace: workspace_bytes (dQ by atomics), plus, for split_tail, D's
/// padding and room for the slots of as many cut tiles as any GPU's plan may cut
/// (tail_split.hpp, slot_capacity: the problem's alone, not this GPU's); or D alone (a
/// separate dQ pass).
template <class Tr>
size_t workspace_bytes_of(const ft::Problem& p) {
  if constexpr (Tr::kDq == DQ::kSeparatePass) {
    return dq_pass_workspace_bytes(p);
  } else if constexpr (!kSplitsTail<Tr>) {
    return workspace_bytes(p);
  } else {
    const int64_t slots = slot_capacity(key_tiles<Tr>(p), query_tiles<Tr>(p), p.causal) * 2 * Tr::Bc * Tr::D;
    return workspace_bytes(p) + size_t(padded_rows(p) - p.rows() + slots) * sizeof(float);
  }
}

template <template <class, int> class Variant>
size_t variant_workspace_bytes(const ft::Problem& p) {
  size_t bytes = 0;
  Compiled::dispatch(p, "chapter 08", [&](auto i) {
    using I = decltype(i);
    bytes = workspace_bytes_of<Variant<typename I::Element, I::kHeadDim>>(p);
  });
  return bytes;
}

template <template <class, int> class Variant, bool kTakesViews = false>
ft::BackwardImpl impl(const std::string& variant, const std::string& what) {
  return {"08",
          variant,
          what,
          Compiled::head_dims(),
          variant_workspace_bytes<Variant>,
          ch07::fastest().run,
          run<Variant, kTakesViews>,
          traffic<Variant>,
          Compiled::dtypes(),
          kMinSm,
          kTakesViews};
}


}  // namespace ch08::detail

namespace ch08 {

// The variants, each made in the staircase file that instantiates its kernels.
ft::BackwardImpl wide_kv();
ft::BackwardImpl async();
ft::BackwardImpl dq_pass();
ft::BackwardImpl async_br32();
ft::BackwardImpl async_bc64();
ft::BackwardImpl warp_tiles();
ft::BackwardImpl hoisted();
ft::BackwardImpl spread_atomics();
ft::BackwardImpl pipelined_dk();
ft::BackwardImpl late_copy();
ft::BackwardImpl dq_pointer();
ft::BackwardImpl split_tail();

}  // namespace ch08
