/// @file tiled_matmul.cuh
/// @brief Chapter 02's shared-memory tiled matrix product, batched, in float32. Chapter 03
/// uses it for both products of its forward pass and chapter 05 for its materializing
/// backward, so this interface stays fixed. (smem_tiles_matmul, the same product without
/// register micro-tiles, serves chapter 02's first variant only.)
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "harness/traffic.hpp"

namespace ch02 {

/// C[b] = alpha · op(A[b]) · op(B[b]) for b in [0, batch), row-major float32.
/// op(A) is M×K (A is stored K×M when trans_a); op(B) is K×N (B stored N×K when trans_b).
/// Matrices of a batch are stride_a / stride_b / stride_c elements apart.
/// Any sizes ≥ 0 (ragged edges are masked); launches on `stream` without synchronising.
void tiled_matmul(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                  const float* A, int64_t stride_a, const float* B, int64_t stride_b,
                  float* C, int64_t stride_c, int64_t batch, cudaStream_t stream);

/// Its ledger line (requested and DRAM bytes, flops) for those sizes. `what` names the
/// product in the note ("S = scale·Q·Kᵀ"). `operands_fit_l2`: the caller's judgement that
/// the panels re-read by neighbouring blocks stay in L2, so each operand reaches DRAM once.
ft::KernelTraffic tiled_matmul_traffic(const char* what, int M, int N, int K, int64_t batch,
                                       bool operands_fit_l2);

/// The C tile one block computes is kMatmulTile × kMatmulTile (for ledgers that need it).
constexpr int kMatmulTile = 64;

// ---- Chapter 02's first kernel, for its variant `smem_tiles` only -------------------------

/// The same product, the same arguments, by the kernel without register micro-tiles
/// (smem_tiles.cuh): kSmemTile × kSmemTile tiles of C, one element a thread.
void smem_tiles_matmul(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                       const float* A, int64_t stride_a, const float* B, int64_t stride_b,
                       float* C, int64_t stride_c, int64_t batch, cudaStream_t stream);

/// Its ledger line, as tiled_matmul_traffic's with kSmemTile-wide tiles: A is read once per
/// column of tiles, ceil(N / kSmemTile) times, B ceil(M / kSmemTile) times.
ft::KernelTraffic smem_tiles_matmul_traffic(const char* what, int M, int N, int K,
                                            int64_t batch, bool operands_fit_l2);

/// The C tile one block of smem_tiles_matmul computes is kSmemTile × kSmemTile.
constexpr int kSmemTile = 16;

}  // namespace ch02
