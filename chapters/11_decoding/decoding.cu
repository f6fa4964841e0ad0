// Chapter 11's decode implementations: a block a query head (one_block), the keys split
// across blocks and merged by their lse (split_kv), and a block a key/value head for all the
// query heads that read it (grouped); their launch, ledger and registration.
#include "11_decoding/decoding.hpp"

#include <algorithm>
#include <climits>
#include <string>

#include "11_decoding/decode_kernels.cuh"
#include "core/check.cuh"
#include "device/dispatch.cuh"
#include "device/launch.cuh"
#include "harness/registry.hpp"
#include "harness/traffic.hpp"

namespace ch11 {

/// Four blocks a SM: each block streams its keys with 4 warps, and a few blocks a SM keep
/// enough loads in flight to draw the memory's bandwidth (to be measured against a sweep).
constexpr int kBlocksPerSm = 4;
/// A split reads at least this many keys: below it the block's start and the merge's extra
/// pass are a larger share than the parallelism they buy (two rounds of 4 warps × 32 keys).
constexpr int kMinSplitKeys = 256;
/// At most this many splits: the merge reads splits × (d + 1) floats a query row.
constexpr int kMaxSplits = 128;

int choose_splits(int64_t blocks, int len_kv, int sms) {
  if (blocks <= 0 || len_kv <= 0 || sms <= 0) return 1;
  const int64_t want = (int64_t(kBlocksPerSm) * sms + blocks - 1) / blocks;
  const int64_t most = std::max(1, (len_kv + kMinSplitKeys - 1) / kMinSplitKeys);
  return int(std::max<int64_t>(1, std::min<int64_t>({want, most, kMaxSplits})));
}

namespace {

using Compiled = ft::Instances<ft::DTypes<ft::DType::BFloat16, ft::DType::Float16>, ft::HeadDims<64, 128>>;

// How a variant lays its blocks out (template parameters below):
//   kGrouped: a block a key/value head (all its query heads), or a block a query head;
//   kSplit:   the keys split across blocks (choose_splits), or one block the whole range.

int64_t rows_a_head(const ft::Problem& p, bool grouped) { return int64_t(grouped ? p.group() : 1) * p.len_q; }

int splits_of(const ft::Problem& p, bool grouped, bool split) {
  if (!split) return 1;
  const int64_t heads = grouped ? p.kv_heads_total() : p.heads_total();
  const int chunks = int((rows_a_head(p, grouped) + kMaxQueryRows - 1) / kMaxQueryRows);
  return choose_splits(heads * chunks, p.len_kv, ft::sm_count());
}

/// The most splits choose_splits can give for these keys, whatever the GPU: the workspace is
/// sized before any GPU is asked.
int max_splits(int len_kv) { return std::min(kMaxSplits, std::max(1, (len_kv + kMinSplitKeys - 1) / kMinSplitKeys)); }

template <bool kGrouped, bool kSplit>
size_t workspace(const ft::Problem& p) {
  const int splits = kSplit ? max_splits(p.len_kv) : 1;
  if (splits == 1) return 0;
  return size_t(splits) * size_t(p.rows()) * (size_t(p.head_dim) + 1) * sizeof(float);
}

template <class T, int D, int kRows, bool kGrouped>
void launch_rows(const Params<T>& params, dim3 grid, cudaStream_t stream) {
  decode_split<T, D, kRows, kGrouped><<<grid, kThreads, 0, stream>>>(params);
}

template <bool kGrouped, bool kSplit>
void run(const ft::Problem& p, const ft::ForwardArgs& a, cudaStream_t stream) {
  if (p.len_q > kMaxQueryRows)
    throw ft::Unsupported("chapter 11 decodes at most " + std::to_string(kMaxQueryRows) +
                          " query rows a sequence (N_q = " + std::to_string(p.len_q) +
                          "): prefill a longer prompt with chapter 07's or 09's forward");
  if (!(p.softmax_scale() > 0.f)) throw ft::Unsupported("chapter 11: the softmax scale must be positive");
  if (a.layout) throw ft::Unsupported("chapter 11 reads contiguous tensors only");
  Compiled::dispatch(p, "chapter 11", [&](auto i) {
    using I = decltype(i);
    using T = typename I::Element;
    constexpr int D = I::kHeadDim;
    const int64_t rows = rows_a_head(p, kGrouped);
    const int splits = splits_of(p, kGrouped, kSplit);
    const int64_t heads = kGrouped ? p.kv_heads_total() : p.heads_total();
    if (heads > 65535) throw ft::Unsupported("chapter 11: more than 65535 heads in one launch");
    const int keys_per_split = (p.len_kv + splits - 1) / splits;
    float* o_part = static_cast<float*>(a.workspace);
    // The workspace holds max_splits' worth: O parts first, then the lse parts.
    float* lse_part = o_part ? o_part + size_t(max_splits(p.len_kv)) * size_t(p.rows()) * D : nullptr;
    const Params<T> params{a.Q.as<T>(), a.K.as<T>(), a.V.as<T>(), a.O.as<T>(), a.lse, o_part, lse_part,
                           p.len_q, p.len_kv, p.heads_q, p.heads_kv, p.group(), p.causal_offset(), p.causal,
                           p.softmax_scale() * ft::kLog2e, splits, keys_per_split, int(rows), p.rows()};
    // The block's rows: the next power of two at or above them, at most 16 (more: blocks
    // side by side along z, each reading the K/V head again, mostly from L2).
    const int block_rows = rows <= 1 ? 1 : rows <= 2 ? 2 : rows <= 4 ? 4 : rows <= 8 ? 8 : 16;
    const dim3 grid(unsigned(splits), unsigned(heads), unsigned((rows + block_rows - 1) / block_rows));
    switch (block_rows) {
      case 1: launch_rows<T, D, 1, kGrouped>(params, grid, stream); break;
      case 2: launch_rows<T, D, 2, kGrouped>(params, grid, stream); break;
      case 4: launch_rows<T, D, 4, kGrouped>(params, grid, stream); break;
      case 8: launch_rows<T, D, 8, kGrouped>(params, grid, stream); break;
      default: launch_rows<T, D, 16, kGrouped>(params, grid, stream); break;
    }
    CUDA_CHECK_LAUNCH();
    if (splits > 1) {
      decode_merge<T, D><<<int((p.rows() + kWarps - 1) / kWarps), kThreads, 0, stream>>>(
          o_part, lse_part, a.O.as<T>(), a.lse, p.rows(), splits);
      CUDA_CHECK_LAUNCH();
    }
  });
}

/// The ledger: K and V read once a block layout (grouped: once; a block a query head: once a
/// query head, the group's other reads from L2 when they run together), Q read and O written
/// once; with splits, each split's float32 O and lse written and read back by the merge.
template <bool kGrouped, bool kSplit>
std::vector<ft::KernelTraffic> traffic(const ft::Problem& p) {
  const double kv = 2.0 * double(p.kv_bytes());
  const double reads_of_kv = kGrouped ? kv : kv * p.group();
  const double q = double(p.q_bytes()), o = double(p.q_bytes()), l = double(p.rows()) * ft::kFloatBytes;
  const int splits = kSplit ? choose_splits(kGrouped ? p.kv_heads_total() : p.heads_total(), p.len_kv,
                                                 int(ft::gpu_facts().sms))
                                 : 1;
  const double part = splits > 1 ? double(splits) * double(p.rows()) * (p.head_dim + 1) * ft::kFloatBytes : 0.0;
  std::vector<ft::KernelTraffic> t{{"decode_split", q + reads_of_kv, splits > 1 ? part : o + l, q + kv,
                                    splits > 1 ? part : o + l, p.forward_flops(),
                                    kGrouped ? "K and V read once for every query head that shares them"
                                                  : "K and V read once a query head (the group's re-reads from L2)"}};
  if (splits > 1)
    t.push_back({"decode_merge", part, o + l, part, o + l, 0.0, "each split's O and lse read once, O written once"});
  return t;
}

template <bool kGrouped, bool kSplit>
ft::ForwardImpl impl(const std::string& variant, const std::string& what) {
  return {"11", variant, what, Compiled::head_dims(), workspace<kGrouped, kSplit>, run<kGrouped, kSplit>,
          traffic<kGrouped, kSplit>,
          Compiled::dtypes(), /*min_sm=*/80, /*strided=*/false, ft::Features{/*lengths=*/true, /*grouped=*/true}};
}


}  // namespace

const ft::ForwardImpl& fastest() {
  static const ft::ForwardImpl i = impl<true, true>("fastest", "grouped (the last step)");
  return i;
}

std::vector<ft::ForwardImpl> forward_impls() {
  return {impl<false, false>("one_block", "a block a (sequence, query head): the keys in one block"),
          impl<false, true>("split_kv", "the keys split across blocks, merged by their lse"),
          impl<true, true>("grouped", "split_kv, a block a key/value head for all its query heads"),
          fastest()};
}

}  // namespace ch11

FT_REGISTER(ch11) {
  for (const auto& impl : ch11::forward_impls()) {
    const bool fastest = impl.variant == ch11::fastest().variant;
    ft::register_forward(impl, /*headline=*/fastest, /*tour=*/false);
  }
}
