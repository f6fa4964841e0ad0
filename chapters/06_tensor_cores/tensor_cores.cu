// Chapter 06: chapter 02's three passes on the tensor cores, bf16 or fp16 in, float32
// accumulation, the N×N grid still in device memory:
//
//   S = scale·Q·Kᵀ   qk_scores_tc     a 128×128 tile of S per block, ldmatrix + mma.sync
//   P = softmax(S)    row_softmax_tc   a block per row, chapter 03's online softmax, the row
//                                      in registers: one read of S, one write of P (over S)
//   O = P·V           pv_output_tc     128 query rows per block, 64-key tiles of P and V
//                                      double-buffered with cp.async
//
// Two variants, one question: what the grid costs when S is stored as float32 (grid_f32)
// or rounded to the dtype (grid_half). The kernels are qk_scores.cuh, row_softmax.cuh and
// pv_output.cuh; the ledger is ledger.cpp. A third, warp_rows, is grid_half with another
// softmax kernel (warp_softmax.cuh: a warp per row for rows of up to 2048 elements, the same
// bytes with less work per row), row_softmax_tc past that.
#include <climits>
#include <string>

#include "06_tensor_cores/pv_output.cuh"
#include "06_tensor_cores/qk_scores.cuh"
#include "06_tensor_cores/row_softmax.cuh"
#include "06_tensor_cores/tensor_cores.hpp"
#include "06_tensor_cores/warp_softmax.cuh"
#include "harness/registry.hpp"
#include "core/check.cuh"
#include "device/dispatch.cuh"
#include "device/launch.cuh"

namespace ch06 {
namespace {

/// mma.sync with bf16 operands and cp.async both need sm_80 (Ampere) or newer.
constexpr int kMinSm = 80;

using ft::ceil_div;

/// grid.x of one launch: every kernel here flattens heads and tiles into it (up to 2^31 − 1).
unsigned blocks_or_throw(int64_t blocks, const char* kernel) {
  if (blocks > INT_MAX)
    throw ft::Unsupported(std::string("chapter 06: ") + kernel + " needs " +
                          std::to_string(blocks) + " blocks, more than one grid holds");
  return unsigned(blocks);
}

/// Score tiles of one head: all of them, or (causal) those on or below the diagonal.
int64_t score_tiles_per_head(const ft::Problem& p) {
  const int64_t tiles = ceil_div(p.len_q, kScoreTile);
  return p.causal ? tiles * (tiles + 1) / 2 : tiles * tiles;
}

template <class Score, class T, int kRegs>
void launch_softmax(const SoftmaxParams<Score, T>& sp, int64_t rows, cudaStream_t stream) {
  row_softmax_tc<Score, T, kRegs><<<blocks_or_throw(rows, "row_softmax_tc"), kSoftmaxThreads, 0, stream>>>(sp);
  CUDA_CHECK_LAUNCH();
}

template <class T, class Score, int D, SoftmaxKernel kSoftmax>
void forward(const ft::Problem& p, const ft::ForwardArgs& a, cudaStream_t stream) {
  ft::require_sm(kMinSm, "chapter 06");
  const int N = p.len_q, ld = grid_row_stride(N);
  const int64_t BH = p.heads_total();
  Score* S = static_cast<Score*>(a.workspace);

  // 1. S = scale·Q·Kᵀ: tiles on or below the diagonal only, when causal.
  const int tiles = ceil_div(N, kScoreTile);
  const int64_t per_head = score_tiles_per_head(p);
  const unsigned score_blocks = blocks_or_throw(BH * per_head, "qk_scores_tc");
  ft::allow_dynamic_smem(qk_scores_tc<T, Score, D>, scores_smem_bytes<D, Score>(), "chapter 06 qk_scores_tc");
  const ScoresParams<T, Score> qp{a.Q.as<T>(), a.K.as<T>(), S,        N,
                                  ld,          tiles,       int(per_head), p.causal,
                                  p.softmax_scale()};
  qk_scores_tc<T, Score, D><<<score_blocks, kScoreThreads, scores_smem_bytes<D, Score>(), stream>>>(qp);
  CUDA_CHECK_LAUNCH();

  // 2. P = softmax(S), written over S: P's rows keep S's row starts (p_ld counts in T).
  T* P = reinterpret_cast<T*>(S);
  const int p_ld = ld * int(sizeof(Score) / sizeof(T));
  const SoftmaxParams<Score, T> sp{S, P, a.lse, N, ld, p_ld, p.causal};
  bool by_warp = false;  // warp_rows: a warp per row where the row fits (ld ≤ 2048)
  if constexpr (kSoftmax == SoftmaxKernel::WarpPerRow) {
    by_warp = warp_softmax_fits(ld);
    if (by_warp)
      launch_warp_softmax(sp, p.rows(), blocks_or_throw(warp_softmax_blocks(p.rows()), "warp_softmax_tc"),
                          stream);
  }
  if (!by_warp) {
    switch (softmax_regs(ld)) {
      case 16: launch_softmax<Score, T, 16>(sp, p.rows(), stream); break;
      case 32: launch_softmax<Score, T, 32>(sp, p.rows(), stream); break;
      default: launch_softmax<Score, T, kSoftmaxMaxRegs>(sp, p.rows(), stream); break;
    }
  }

  // 3. O = P·V.
  const int q_tiles = ceil_div(N, kPvRows);
  ft::allow_dynamic_smem(pv_output_tc<T, D>, PvLayout<D>::kSmemBytes, "chapter 06 pv_output_tc");
  const PvParams<T> pp{P, p_ld, a.V.as<T>(), a.O.as<T>(), N, q_tiles, p.causal};
  pv_output_tc<T, D><<<blocks_or_throw(BH * q_tiles, "pv_output_tc"), kPvThreads,
                       PvLayout<D>::kSmemBytes, stream>>>(pp);
  CUDA_CHECK_LAUNCH();
}

// The instances compiled: the tensor cores' two 16-bit types at the two head dims whose
// tiles the mma shapes divide; the registrations list what this grid holds.
using Compiled = ft::Instances<ft::DTypes<ft::DType::BFloat16, ft::DType::Float16>,
                               ft::HeadDims<64, 128>>;

/// One variant: the dtype and d pick the instance; kStorage says what S is stored as,
/// kSoftmax which kernel turns it into P.
template <ScoreStorage kStorage, SoftmaxKernel kSoftmax>
void run(const ft::Problem& p, const ft::ForwardArgs& a, cudaStream_t stream) {
  Compiled::dispatch(p, "chapter 06", [&](auto i) {
    using T = typename decltype(i)::Element;
    using S = std::conditional_t<kStorage == ScoreStorage::Float32, float, T>;  // S's type
    forward<T, S, decltype(i)::kHeadDim, kSoftmax>(p, a, stream);
  });
}

/// The grid's bytes, after checking that the score kernel's grid can be launched at all (so
/// the C API answers FT_WORKSPACE_ERROR, not a size, for a problem the forward refuses).
template <ScoreStorage kStorage>
size_t workspace(const ft::Problem& p) {
  blocks_or_throw(p.heads_total() * score_tiles_per_head(p), "qk_scores_tc");
  return workspace_bytes(p, kStorage);
}

template <ScoreStorage kStorage, SoftmaxKernel kSoftmax>
std::vector<ft::KernelTraffic> ledger(const ft::Problem& p) { return traffic(p, kStorage, kSoftmax); }

template <ScoreStorage kStorage, SoftmaxKernel kSoftmax = SoftmaxKernel::BlockPerRow>
ft::ForwardImpl impl(const std::string& variant, const std::string& what) {
  return {"06",       variant,           what,
          Compiled::head_dims(),  workspace<kStorage>, run<kStorage, kSoftmax>,
          ledger<kStorage, kSoftmax>, Compiled::dtypes(), kMinSm};
}

}  // namespace

const ft::ForwardImpl& grid_f32() {
  static const ft::ForwardImpl i =
      impl<ScoreStorage::Float32>("grid_f32", "tensor-core products; S float32 in the grid, P in the dtype");
  return i;
}

const ft::ForwardImpl& grid_half() {
  static const ft::ForwardImpl i =
      impl<ScoreStorage::Half>("grid_half", "tensor-core products; S and P in the dtype in the grid");
  return i;
}

const ft::ForwardImpl& warp_rows() {
  static const ft::ForwardImpl i = impl<ScoreStorage::Half, SoftmaxKernel::WarpPerRow>(
      "warp_rows", "grid_half with a warp per softmax row (rows up to 2048), no barrier");
  return i;
}

// warp_rows: measured faster than grid_half at N = 1024 (2.3x at d = 64, 2.1x at d = 128,
// tc_variants.csv) and the same kernels, within 0.3%, at N = 4096 and 16384.
const ft::ForwardImpl& fastest() { return warp_rows(); }

std::vector<ft::ForwardImpl> forward_impls() { return {grid_f32(), grid_half(), warp_rows()}; }

}  // namespace ch06

FT_REGISTER(ch06) {
  for (const auto& impl : ch06::forward_impls()) {
    const bool fastest = impl.variant == ch06::fastest().variant;
    ft::register_forward(impl, /*headline=*/fastest, /*tour=*/fastest);
  }
}
