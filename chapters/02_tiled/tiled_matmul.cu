/// @file tiled_matmul.cu
/// @brief Chapter 02's idea for the matrix products: stage tiles in shared memory.
///
/// In chapter 01 every output element fetched its own row of A and column of B from device
/// memory: 2·K loads per output. Here a block of 256 threads computes a 64×64 tile of C.
/// It walks the K dimension in slabs of 16: all threads copy the 64×16 slab of op(A) and
/// the 16×64 slab of op(B) into shared memory together (coalesced, each element once),
/// wait, and then every thread multiplies from shared memory into a 4×4 patch of C held in
/// registers. Each element fetched from global memory now serves 64 outputs instead of 1.
#include <algorithm>
#include <cstdint>
#include <string>

#include "02_tiled/tiled_matmul.cuh"
#include "check.cuh"

namespace ch02 {
namespace {

// A block computes a kTile×kTile tile of C. 64 makes every element loaded from global
// memory serve 64 outputs, matches the tutorial's main head dimension (O = P·V is N×64,
// one tile wide, no wasted columns), and keeps the two slabs at 8.7 KB of shared memory,
// small enough for several blocks to share an SM.
constexpr int kTile = kMatmulTile;
// Depth of one slab along K: 64×16 = 1024 floats per operand, 4 per thread, fetched in
// one coalesced sweep per __syncthreads() pair. Deeper slabs sync less often but need
// more shared memory for the same tile.
constexpr int kSlab = 16;
// Each thread owns a kMicro×kMicro patch of C in registers: per step along K it reads one
// float4 of A and one float4 of B from shared memory and does 16 multiply-adds, so shared
// memory bandwidth stays below the FMA rate.
constexpr int kMicro = 4;
constexpr int kThreadsPerSide = kTile / kMicro;                  // 16
constexpr int kThreads = kThreadsPerSide * kThreadsPerSide;      // 256
// Slab rows are padded from 64 to 68 floats. When an operand has K contiguous in memory
// the copy transposes it into the slab, and with a row stride of 64 floats (a multiple of
// the 32 banks) 16 threads of a warp would store to the same bank; 68 spreads them over
// the banks (2-way at most) and keeps every row 16-byte aligned for float4 reads.
constexpr int kPad = 4;
// Ask the compiler to fit 4 blocks (1024 threads) on an SM: at most 64 registers a thread.
// Without it some transpose combinations take 80 and only 3 blocks fit.
constexpr int kMinBlocksPerSm = 4;
// CUDA limits grid.y and grid.z to 65535 blocks; larger batches loop inside the kernel.
constexpr int64_t kMaxGridYZ = 65535;

using Slab = float[kSlab][kTile + kPad];

/// Copies the kSlab×kTile slab of one operand into shared memory as slab[k][t], where t is
/// the row of op(A) (m) or the column of op(B) (n), with zeros outside the matrix. The
/// operand is stored T×K (k contiguous, kKContiguous) or K×T (t contiguous); either way
/// consecutive threads read consecutive addresses, so the loads are coalesced.
template <bool kKContiguous>
__device__ __forceinline__ void load_slab(Slab& slab, const float* X, int T, int K, int t0,
                                          int k0) {
#pragma unroll
  for (int r = 0; r < kSlab * kTile / kThreads; ++r) {  // 4 elements per thread
    const int e = r * kThreads + threadIdx.x;
    const int t = kKContiguous ? e / kSlab : e % kTile;
    const int k = kKContiguous ? e % kSlab : e / kTile;
    const int gt = t0 + t, gk = k0 + k;
    float v = 0.f;
    if (gt < T && gk < K) v = kKContiguous ? X[int64_t(gt) * K + gk] : X[int64_t(gk) * T + gt];
    slab[k][t] = v;
  }
}

/// C[b] = alpha · op(A[b]) · op(B[b]) for the tile (blockIdx.y, blockIdx.x) of every
/// matrix b = blockIdx.z, blockIdx.z + gridDim.z, …
template <bool kTransA, bool kTransB>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)
    tiled_matmul_kernel(int M, int N, int K, float alpha, const float* A, int64_t stride_a,
                        const float* B, int64_t stride_b, float* C, int64_t stride_c,
                        int64_t batch, bool vector_stores) {
  __shared__ __align__(16) Slab As;  // As[k][m]: op(A)'s slab, a column of it per k
  __shared__ __align__(16) Slab Bs;  // Bs[k][n]: op(B)'s slab, a row of it per k
  const int m0 = blockIdx.y * kTile, n0 = blockIdx.x * kTile;
  const int tm = (threadIdx.x / kThreadsPerSide) * kMicro;  // this thread's patch in the tile
  const int tn = (threadIdx.x % kThreadsPerSide) * kMicro;

  for (int64_t b = blockIdx.z; b < batch; b += gridDim.z) {
    float acc[kMicro][kMicro] = {};
    for (int k0 = 0; k0 < K; k0 += kSlab) {
      // op(A) is M×K: A holds it M×K (k contiguous) or, transposed, K×M.
      load_slab<!kTransA>(As, A + b * stride_a, M, K, m0, k0);
      // op(B) is K×N: B holds it K×N (n contiguous) or, transposed, N×K (k contiguous).
      load_slab<kTransB>(Bs, B + b * stride_b, N, K, n0, k0);
      __syncthreads();  // the slabs are complete
#pragma unroll
      for (int k = 0; k < kSlab; ++k) {
        const float4 a4 = *reinterpret_cast<const float4*>(&As[k][tm]);
        const float4 b4 = *reinterpret_cast<const float4*>(&Bs[k][tn]);
        const float a[kMicro] = {a4.x, a4.y, a4.z, a4.w};
        const float bv[kMicro] = {b4.x, b4.y, b4.z, b4.w};
#pragma unroll
        for (int i = 0; i < kMicro; ++i)
#pragma unroll
          for (int j = 0; j < kMicro; ++j) acc[i][j] = fmaf(a[i], bv[j], acc[i][j]);
      }
      __syncthreads();  // everyone is done with the slabs before they are overwritten
    }

    // Each thread writes its 4×4 patch: one float4 per row when rows are 16-byte aligned
    // (a warp then stores two contiguous 256-byte runs), element by element otherwise.
    float* Cb = C + b * stride_c;
    const int n = n0 + tn;
#pragma unroll
    for (int i = 0; i < kMicro; ++i) {
      const int m = m0 + tm + i;
      if (m >= M || n >= N) continue;
      float* c = Cb + int64_t(m) * N + n;
      if (vector_stores) {  // N % 4 == 0, so n < N means n + 3 < N
        *reinterpret_cast<float4*>(c) = make_float4(alpha * acc[i][0], alpha * acc[i][1],
                                                    alpha * acc[i][2], alpha * acc[i][3]);
      } else {
#pragma unroll
        for (int j = 0; j < kMicro; ++j)
          if (n + j < N) c[j] = alpha * acc[i][j];
      }
    }
  }
}

template <bool kTransA, bool kTransB>
void launch(dim3 grid, cudaStream_t stream, int M, int N, int K, float alpha, const float* A,
            int64_t stride_a, const float* B, int64_t stride_b, float* C, int64_t stride_c,
            int64_t batch, bool vector_stores) {
  tiled_matmul_kernel<kTransA, kTransB><<<grid, kThreads, 0, stream>>>(
      M, N, K, alpha, A, stride_a, B, stride_b, C, stride_c, batch, vector_stores);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void tiled_matmul(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                  const float* A, int64_t stride_a, const float* B, int64_t stride_b,
                  float* C, int64_t stride_c, int64_t batch, cudaStream_t stream) {
  if (M < 0 || N < 0 || K < 0 || batch < 0)
    throw ft::Unsupported("tiled_matmul: negative size");
  if (M == 0 || N == 0 || batch == 0) return;
  const int64_t tiles_m = (M + kTile - 1) / kTile, tiles_n = (N + kTile - 1) / kTile;
  if (tiles_m > kMaxGridYZ)
    throw ft::Unsupported("tiled_matmul: M = " + std::to_string(M) + " needs more than " +
                          std::to_string(kMaxGridYZ) + " row tiles");
  const dim3 grid(unsigned(tiles_n), unsigned(tiles_m), unsigned(std::min(batch, kMaxGridYZ)));
  // float4 stores need every row of C to start on a 16-byte boundary.
  const bool vector_stores = N % 4 == 0 && stride_c % 4 == 0 &&
                             reinterpret_cast<uintptr_t>(C) % 16 == 0;
  auto* go = trans_a ? (trans_b ? launch<true, true> : launch<true, false>)
                     : (trans_b ? launch<false, true> : launch<false, false>);
  go(grid, stream, M, N, K, alpha, A, stride_a, B, stride_b, C, stride_c, batch, vector_stores);
}

ft::KernelTraffic tiled_matmul_traffic(const char* what, int M, int N, int K, int64_t batch,
                                       bool operands_fit_l2) {
  const double nb = double(batch);
  ft::KernelTraffic t;
  t.kernel = "tiled_matmul_kernel";
  // Every block reads its 64 rows of op(A) and 64 columns of op(B) in full: A is read once
  // per column of tiles, B once per row of tiles.
  t.read_bytes = nb * ft::tiled_matmul_read_bytes(M, N, K, kTile, kTile);
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

}  // namespace ch02
