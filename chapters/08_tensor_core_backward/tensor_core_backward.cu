/// @file tensor_core_backward.cu
/// @brief Chapter 08's implementation: the launches of flash_backward_tc.cuh's three
/// kernels per (dtype, d), the workspace, the ledger and the C API.
#include "08_tensor_core_backward/tensor_core_backward.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "07_tensor_core_forward/flash_forward.hpp"
#include "08_tensor_core_backward/flash_backward_tc.cuh"
#include "capi.hpp"
#include "check.cuh"
#include "launch.cuh"

namespace ch08 {
namespace {

/// mma.sync with bf16 and fp16 operands: sm_80.
constexpr int kMinSm = 80;

/// The plain variant: 64 keys a block, 4 warps (16 keys each), 64 queries a tile at d = 64
/// and 32 at d = 128, where dK and dV take 128 registers a lane and 64 queries of Sᵀ and
/// dPᵀ on top spilled (ptxas -v); 32 queries halve those to 16 registers each.
constexpr int plain_br(int d) { return d == 128 ? 32 : 64; }
constexpr int kBc = 64;
template <class T, int D>
using Plain = BackwardTraits<T, D, plain_br(D), kBc, 4>;

/// The workspace: [dQ accumulator: rows·d floats | D: rows floats]. The accumulator first,
/// at the workspace's own (16-byte) alignment, for its float2 atomics.
struct Workspace {
  float* dq_acc;
  float* D;
  Workspace(const ft::Problem& p, void* ws) {
    dq_acc = static_cast<float*>(ws);
    D = dq_acc + p.elems();
  }
};

template <class Tr>
void launch(const ft::Problem& p, const ft::BackwardArgs& a, cudaStream_t stream) {
  using T = typename Tr::T;
  ft::require_sm(kMinSm, "chapter 08");
  ft::allow_dynamic_smem(flash_backward_tc<Tr>, Tr::kSmemBytes, "chapter 08 backward");
  const int num_kv_tiles = (p.seq_len + Tr::Bc - 1) / Tr::Bc;
  const int64_t blocks = int64_t(num_kv_tiles) * p.heads_total();  // grid.x: up to 2^31 − 1
  if (blocks > INT_MAX) throw ft::Unsupported("chapter 08: too many blocks for one grid");
  const int64_t rows = p.rows();
  const int64_t d_blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  if (d_blocks > INT_MAX) throw ft::Unsupported("chapter 08: too many rows for one launch");
  const Workspace w(p, a.workspace);

  dot_dO_O_tc<T><<<int(d_blocks), kSmallBlock, 0, stream>>>(a.O.as<T>(), a.dO.as<T>(), w.D,
                                                            w.dq_acc, rows, p.head_dim);
  CUDA_CHECK_LAUNCH();

  const Params<T> params{a.Q.as<T>(), a.K.as<T>(),  a.V.as<T>(),  a.dO.as<T>(),
                         a.lse,       w.D,          w.dq_acc,     a.dK.as<T>(),
                         a.dV.as<T>(), p.seq_len,   num_kv_tiles, p.causal,
                         p.softmax_scale(), p.softmax_scale() * ft::kLog2e};
  flash_backward_tc<Tr><<<int(blocks), Tr::kThreads, Tr::kSmemBytes, stream>>>(params);
  CUDA_CHECK_LAUNCH();

  // A grid-stride loop: a few waves of blocks whatever the size.
  const int64_t n = p.elems();
  const int c_blocks = int(std::min<int64_t>((n + kSmallBlock - 1) / kSmallBlock, 1 << 16));
  convert_dq<T><<<c_blocks, kSmallBlock, 0, stream>>>(w.dq_acc, a.dQ.as<T>(), n);
  CUDA_CHECK_LAUNCH();
}

/// A variant: for each (dtype, d), which traits. Shape<T, D> names the BackwardTraits.
template <template <class, int> class Shape>
void run(const ft::Problem& p, const ft::BackwardArgs& a, cudaStream_t stream) {
  const bool bf16 = p.dtype == ft::DType::BFloat16;
  if (!bf16 && p.dtype != ft::DType::Float16)
    throw ft::Unsupported("chapter 08: dtype must be bf16 or fp16");
  if (p.head_dim != 64 && p.head_dim != 128)
    throw ft::Unsupported("chapter 08: head_dim must be 64 or 128");
  for (const void* ptr : {a.Q.get(), a.K.get(), a.V.get(), a.dO.get(), static_cast<const void*>(a.workspace)})
    if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0)
      throw ft::Unsupported("chapter 08: tensors and workspace must be 16-byte aligned");
  if (p.head_dim == 64)
    return bf16 ? launch<Shape<__nv_bfloat16, 64>>(p, a, stream)
                : launch<Shape<__half, 64>>(p, a, stream);
  return bf16 ? launch<Shape<__nv_bfloat16, 128>>(p, a, stream)
              : launch<Shape<__half, 128>>(p, a, stream);
}

// ---- Ledger pieces (chapter 05's flash ledger, with 2-byte tensors and a float32 dQ) -------

int n_tiles(int N, int tile) { return (N + tile - 1) / tile; }
double tile_rows(int N, int tile, int t) { return std::min(tile, N - t * tile); }

/// Key blocks that load query tile i: all; causal, those whose first query tile
/// floor(j·Bc/Br) is ≤ i, i.e. j < (i+1)·Br/Bc.
double blocks_visiting_query_tile(const ft::Problem& p, int i, int Br) {
  const int n_kv = n_tiles(p.seq_len, kBc);
  return p.causal ? std::min(n_kv, n_tiles((i + 1) * Br, kBc)) : n_kv;
}

ft::KernelTraffic dot_traffic(const ft::Problem& p) {
  const double in = 2 * double(p.tensor_bytes());                        // O, dO (2-byte)
  const double out = double(p.rows()) * ft::kFloatBytes +                // D
                     double(p.elems()) * ft::kFloatBytes;                // dQ accumulator zeros
  return {"dot_dO_O_tc", in, out, in, out, 2.0 * double(p.elems()),
          "O, dO streamed once; D and the float32 dQ accumulator (zeros) written once"};
}

ft::KernelTraffic main_traffic(const ft::Problem& p) {
  const int N = p.seq_len;
  const double d = p.head_dim, bh = double(p.heads_total()), fb = ft::kFloatBytes;
  const double eb = double(ft::dtype_bytes(p.dtype));
  const int Br = plain_br(p.head_dim);
  double q_rows_loaded = 0;  // Σ over query tiles of rows × key blocks loading them, per head
  for (int i = 0; i < n_tiles(N, Br); ++i)
    q_rows_loaded += tile_rows(N, Br, i) * blocks_visiting_query_tile(p, i, Br);
  const double kv = 2 * double(p.tensor_bytes());  // K, V in; dK, dV out: once each
  ft::KernelTraffic t;
  t.kernel = "flash_backward_tc";
  t.read_bytes = kv + bh * q_rows_loaded * (2 * d * eb + 2 * fb);  // Q, dO; L, D
  t.write_bytes = kv + bh * q_rows_loaded * d * fb;                // dQ atomics, float32
  t.flops = p.backward_flops();  // the five products, 2·N²·d each (halved causal)
  // What a head's key blocks (adjacent on the grid) re-read: its Q, dO, L, D and dQ.
  const double per_head_reread = double(N) * (2 * d * eb + 2 * fb + d * fb);
  const double acc = double(p.elems()) * fb;
  if (ft::fits_l2(per_head_reread)) {
    t.dram_read_bytes = 4 * double(p.tensor_bytes()) + 2 * double(p.rows()) * fb + acc;
    t.dram_write_bytes = kv + acc;
    t.note = "Q,K,V,dO,L,D and the dQ accumulator read once; dK,dV,dQ(float32) written once: "
             "re-reads and atomics stay in L2";
  } else {
    t.dram_read_bytes = t.read_bytes;
    t.dram_write_bytes = t.write_bytes;
    t.note = "one head's Q,dO,dQ exceed the L2 share: every re-read counted (upper bound)";
  }
  return t;
}

ft::KernelTraffic convert_traffic(const ft::Problem& p) {
  const double in = double(p.elems()) * ft::kFloatBytes, out = double(p.tensor_bytes());
  return {"convert_dq", in, out, in, out, 0.0, "the float32 dQ read once, dQ written once"};
}

}  // namespace

size_t workspace_bytes(const ft::Problem& p) {
  return size_t(p.elems()) * sizeof(float) + size_t(p.rows()) * sizeof(float);
}

std::vector<ft::KernelTraffic> plain_traffic(const ft::Problem& p) {
  return {dot_traffic(p), main_traffic(p), convert_traffic(p)};
}

const ft::BackwardImpl& plain() {
  static const ft::BackwardImpl impl{
      "08",
      "plain",
      "tensor cores: S^T = K*Q^T, P^T/dS^T from accumulators, dQ by float32 atomics",
      {64, 128},
      workspace_bytes,
      ch07::fastest().run,
      run<Plain>,
      plain_traffic,
      {ft::DType::BFloat16, ft::DType::Float16},
      kMinSm};
  return impl;
}

std::vector<ft::BackwardImpl> backward_impls() { return {plain()}; }

}  // namespace ch08

FT_EXPORT_BACKWARD(ft_ch08_backward, ch08::plain())
