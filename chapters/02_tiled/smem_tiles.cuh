/// @file smem_tiles.cuh
/// @brief Chapter 02's first matrix-product kernel, variant `smem_tiles`: shared-memory
/// tiles only, one output element a thread (the classic tiled kernel).
///
/// In chapter 01 every output element fetched its own row of A and column of B from device
/// memory: 2·K loads per output. Here a block of 256 threads computes a 16×16 tile of C.
/// It walks the K dimension in steps of 16: all threads copy the 16×16 tile of op(A) and
/// the 16×16 tile of op(B) into shared memory together (coalesced, each element once),
/// wait, and then every thread multiplies a row of one by a column of the other out of
/// shared memory into its one element of C. Each element fetched from global memory now
/// serves 16 outputs instead of 1.
/// The next variant, `tiled` (register_tiles.cuh), keeps the shared-memory slabs and gives
/// each thread a 4×4 patch of C in registers: `diff smem_tiles.cuh register_tiles.cuh`.
///
/// Run it: ./build/chapters/02_tiled/ch02_tiled --variant smem_tiles
/// (tiled_matmul.cu launches it; this file is included there only.)
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "02_tiled/slabs.cuh"  // load_slab
#include "02_tiled/tiled_matmul.cuh"

namespace ch02 {
namespace {
namespace smem_tiles {  // (register_tiles.cuh's constants have the same names)

// A block computes a kTile×kTile tile of C, one element per thread: 16×16 = 256 threads,
// the block size of the register-tiled kernel, and every element loaded from global
// memory serves 16 outputs.
constexpr int kTile = kSmemTile;
// Depth of one step along K: square tiles, 16×16 = 256 floats per operand, one per thread,
// fetched in one coalesced sweep per __syncthreads() pair.
constexpr int kSlab = kTile;
constexpr int kThreadsPerSide = kTile;                           // 16
constexpr int kThreads = kThreadsPerSide * kThreadsPerSide;      // 256
// Tile rows are padded from 16 to 17 floats. When an operand has K contiguous in memory
// the copy transposes it into the tile, and with a row stride of 16 floats the 16 k of a
// warp's t would fall into 2 banks (8-way conflicts); at 17 they spread over the banks
// (2-way at most). No float4 reads here, so rows need no 16-byte alignment.
constexpr int kPad = 1;

using Slab = float[kSlab][kTile + kPad];

/// C[b] = alpha · op(A[b]) · op(B[b]) for the tile (blockIdx.y, blockIdx.x) of every
/// matrix b = blockIdx.z, blockIdx.z + gridDim.z, …
template <bool kTransA, bool kTransB>
__global__ void __launch_bounds__(kThreads)
    smem_tiles_kernel(int M, int N, int K, float alpha, const float* A, int64_t stride_a,
                      const float* B, int64_t stride_b, float* C, int64_t stride_c,
                      int64_t batch) {
  __shared__ Slab As;  // As[k][m]: op(A)'s tile, a column of it per k
  __shared__ Slab Bs;  // Bs[k][n]: op(B)'s tile, a row of it per k
  const int m0 = blockIdx.y * kTile, n0 = blockIdx.x * kTile;
  const int tm = threadIdx.x / kThreadsPerSide;  // this thread's element in the tile
  const int tn = threadIdx.x % kThreadsPerSide;

  for (int64_t b = blockIdx.z; b < batch; b += gridDim.z) {
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += kSlab) {
      // op(A) is M×K: A holds it M×K (k contiguous) or, transposed, K×M.
      load_slab<!kTransA, kTile, kThreads>(As, A + b * stride_a, M, K, m0, k0);
      // op(B) is K×N: B holds it K×N (n contiguous) or, transposed, N×K (k contiguous).
      load_slab<kTransB, kTile, kThreads>(Bs, B + b * stride_b, N, K, n0, k0);
      __syncthreads();  // the tiles are complete
      // Two shared-memory loads for every multiply-add: shared memory, not the FMA units,
      // sets the pace (README, "What to expect").
#pragma unroll
      for (int k = 0; k < kSlab; ++k) acc = fmaf(As[k][tm], Bs[k][tn], acc);
      __syncthreads();  // everyone is done with the tiles before they are overwritten
    }

    // Each thread writes its element: a warp stores two contiguous 64-byte runs.
    const int m = m0 + tm, n = n0 + tn;
    if (m < M && n < N) C[b * stride_c + int64_t(m) * N + n] = alpha * acc;
  }
}

}  // namespace smem_tiles
}  // namespace
}  // namespace ch02
