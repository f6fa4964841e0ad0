/// @file tiled_matmul.cu
/// @brief Chapter 02's matrix products: the launchers and ledger lines of its two kernels,
/// smem_tiles_kernel (smem_tiles.cuh, variant `smem_tiles` only) and tiled_matmul_kernel
/// (register_tiles.cuh), the one chapters 02, 03 and 05 call.
#include <algorithm>
#include <cstdint>
#include <string>

#include "02_tiled/tiled_matmul.cuh"
#include "core/check.cuh"

// The kernels (included here only). smem_tiles.cuh comes first, so that nothing in it can
// lean on a name of register_tiles.cuh.
#include "02_tiled/smem_tiles.cuh"
#include "02_tiled/register_tiles.cuh"

namespace ch02 {
namespace {

// CUDA limits grid.y and grid.z to 65535 blocks; larger batches loop inside the kernel.
constexpr int64_t kMaxGridYZ = 65535;

/// The checks both products make, and their grid: tile×tile blocks of C on x (columns) and
/// y (rows), the batch on z. An empty grid when there is nothing to compute.
dim3 tile_grid(const std::string& who, int M, int N, int K, int64_t batch, int tile) {
  if (M < 0 || N < 0 || K < 0 || batch < 0) throw ft::Unsupported(who + ": negative size");
  if (M == 0 || N == 0 || batch == 0) return dim3(0, 0, 0);
  const int64_t tiles_m = (M + tile - 1) / tile, tiles_n = (N + tile - 1) / tile;
  if (tiles_m > kMaxGridYZ)
    throw ft::Unsupported(who + ": M = " + std::to_string(M) + " needs more than " +
                          std::to_string(kMaxGridYZ) + " row tiles");
  return dim3(unsigned(tiles_n), unsigned(tiles_m), unsigned(std::min(batch, kMaxGridYZ)));
}

template <bool kTransA, bool kTransB>
void launch(dim3 grid, cudaStream_t stream, int M, int N, int K, float alpha, const float* A,
            int64_t stride_a, const float* B, int64_t stride_b, float* C, int64_t stride_c,
            int64_t batch, bool vector_stores) {
  tiled_matmul_kernel<kTransA, kTransB><<<grid, kThreads, 0, stream>>>(
      M, N, K, alpha, A, stride_a, B, stride_b, C, stride_c, batch, vector_stores);
  CUDA_CHECK_LAUNCH();
}

template <bool kTransA, bool kTransB>
void launch_smem_tiles(dim3 grid, cudaStream_t stream, int M, int N, int K, float alpha,
                       const float* A, int64_t stride_a, const float* B, int64_t stride_b,
                       float* C, int64_t stride_c, int64_t batch) {
  smem_tiles::smem_tiles_kernel<kTransA, kTransB><<<grid, smem_tiles::kThreads, 0, stream>>>(
      M, N, K, alpha, A, stride_a, B, stride_b, C, stride_c, batch);
  CUDA_CHECK_LAUNCH();
}

/// The ledger line of a product whose blocks compute tile×tile outputs of C.
ft::KernelTraffic product_traffic(const char* kernel, int tile, const char* what, int M, int N,
                                  int K, int64_t batch, bool operands_fit_l2) {
  const double nb = double(batch);
  ft::KernelTraffic t;
  t.kernel = kernel;
  // Every block reads its `tile` rows of op(A) and `tile` columns of op(B) in full: A is
  // read once per column of tiles, B once per row of tiles.
  t.read_bytes = nb * ft::tiled_matmul_read_bytes(M, N, K, tile, tile);
  t.write_bytes = nb * ft::matrix_bytes(M, N);
  const double once = nb * (ft::matrix_bytes(M, K) + ft::matrix_bytes(K, N));
  t.dram_read_bytes = operands_fit_l2 ? once : t.read_bytes;
  t.dram_write_bytes = t.write_bytes;
  t.flops = 2.0 * M * N * K * nb;
  t.note = std::string(what) + (operands_fit_l2
                                    ? ": neighbouring blocks re-read panels from L2, so each "
                                      "operand reaches DRAM once"
                                    : ": the re-read operands overflow L2, every re-read "
                                      "reaches DRAM");
  return t;
}

}  // namespace

void tiled_matmul(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                  const float* A, int64_t stride_a, const float* B, int64_t stride_b,
                  float* C, int64_t stride_c, int64_t batch, cudaStream_t stream) {
  const dim3 grid = tile_grid("tiled_matmul", M, N, K, batch, kTile);
  if (grid.x == 0) return;
  // float4 stores need every row of C to start on a 16-byte boundary.
  const bool vector_stores = N % 4 == 0 && stride_c % 4 == 0 &&
                             reinterpret_cast<uintptr_t>(C) % 16 == 0;
  auto* go = trans_a ? (trans_b ? launch<true, true> : launch<true, false>)
                     : (trans_b ? launch<false, true> : launch<false, false>);
  go(grid, stream, M, N, K, alpha, A, stride_a, B, stride_b, C, stride_c, batch, vector_stores);
}

void smem_tiles_matmul(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                       const float* A, int64_t stride_a, const float* B, int64_t stride_b,
                       float* C, int64_t stride_c, int64_t batch, cudaStream_t stream) {
  const dim3 grid = tile_grid("smem_tiles_matmul", M, N, K, batch, smem_tiles::kTile);
  if (grid.x == 0) return;
  auto* go = trans_a ? (trans_b ? launch_smem_tiles<true, true> : launch_smem_tiles<true, false>)
                     : (trans_b ? launch_smem_tiles<false, true> : launch_smem_tiles<false, false>);
  go(grid, stream, M, N, K, alpha, A, stride_a, B, stride_b, C, stride_c, batch);
}

ft::KernelTraffic tiled_matmul_traffic(const char* what, int M, int N, int K, int64_t batch,
                                       bool operands_fit_l2) {
  return product_traffic("tiled_matmul_kernel", kTile, what, M, N, K, batch, operands_fit_l2);
}

ft::KernelTraffic smem_tiles_matmul_traffic(const char* what, int M, int N, int K,
                                            int64_t batch, bool operands_fit_l2) {
  return product_traffic("smem_tiles_kernel", smem_tiles::kTile, what, M, N, K, batch,
                         operands_fit_l2);
}

}  // namespace ch02
