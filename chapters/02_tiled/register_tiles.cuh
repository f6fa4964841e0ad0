/// @file register_tiles.cuh
/// @brief Chapter 02's tiled matrix-product kernel, variant `tiled` (the one every product
/// of chapters 02, 03 and 05 runs): shared-memory slabs, and each thread a 4×4 patch of C in
/// registers.
///
/// In chapter 01 every output element fetched its own row of A and column of B from device
/// memory: 2·K loads per output. Here a block of 256 threads computes a 64×64 tile of C.
/// It walks the K dimension in slabs of 16: all threads copy the 64×16 slab of op(A) and
/// the 16×64 slab of op(B) into shared memory together (coalesced, each element once),
/// wait, and then every thread multiplies from shared memory into a 4×4 patch of C held in
/// registers. Each element fetched from global memory now serves 64 outputs instead of 1.
/// What changed from the variant `smem_tiles` (smem_tiles.cuh: 16×16 tiles, one element of
/// C a thread): the register patch, and the wider tile it allows with the same 256 threads:
/// `diff smem_tiles.cuh register_tiles.cuh`.
///
/// Run it: ./build/chapters/02_tiled/ch02_tiled --variant tiled
/// (tiled_matmul.cu launches it; this file is included there only.)
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "02_tiled/slabs.cuh"  // load_slab
#include "02_tiled/tiled_matmul.cuh"

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

using Slab = float[kSlab][kTile + kPad];

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
      load_slab<!kTransA, kTile, kThreads>(As, A + b * stride_a, M, K, m0, k0);
      // op(B) is K×N: B holds it K×N (n contiguous) or, transposed, N×K (k contiguous).
      load_slab<kTransB, kTile, kThreads>(Bs, B + b * stride_b, N, K, n0, k0);
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

}  // namespace
}  // namespace ch02
