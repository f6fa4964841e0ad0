/// @file tiled.hpp
/// @brief Chapter 02: the same three passes as chapter 01, with shared-memory tiled matrix
/// products (tiled_matmul.cuh) and a softmax that gives each row a block of threads; two
/// variants, the products with and without register micro-tiles.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "harness/harness.hpp"
#include "core/problem.hpp"
#include "harness/traffic.hpp"

namespace ch02 {

/// S = scale·Q·Kᵀ (tiled), P = softmax(S) (a block per row), O = P·V (tiled).
/// Workspace: the B·H·N·N float grid, S then P in place.
const ft::ForwardImpl& tiled();

/// The same passes with the products' shared-memory tiles only (variant "smem_tiles":
/// smem_tiles_matmul, one output element a thread, no register micro-tiles), the step
/// before tiled(). Same workspace; its ledger is traffic()'s with 16-wide tiles.
const ft::ForwardImpl& smem_tiles();

/// Every forward implementation of this chapter: smem_tiles(), tiled(), the order the
/// program runs and prints them.
std::vector<ft::ForwardImpl> forward_impls();

/// The chapter's memory ledger (tiled()'s, which chapter 03 builds on): one line per kernel.
std::vector<ft::KernelTraffic> traffic(const ft::Problem& p);

/// Threads that share one row in the block-per-row softmax (here and in chapter 03): 8
/// warps, enough to cover a 4096-wide row in 16 coalesced sweeps, and 8 such blocks fill
/// the 2048 thread slots of an SM.
constexpr int kSoftmaxThreads = 256;

/// Rows the GPU walks at once with one kSoftmaxThreads block per row (H200: 132 SMs × 8
/// blocks). The ledger asks whether these rows fit in L2, i.e. whether a second pass over
/// a row finds it there.
inline double softmax_wave_rows() { return ft::resident_threads() / kSoftmaxThreads; }

/// The safe softmax of `rows` rows of `cols` floats, three passes (max, sum, normalize),
/// one block per row. `out` may equal `in` (in place). `lse` (may be null) gets
/// log Σ_j exp(in[j]) per row. Causal: the rows form square cols×cols grids, and row r
/// sees columns j ≤ r mod cols; the others get 0.
void softmax_rows(const float* in, float* out, float* lse, int64_t rows, int cols, bool causal,
                  cudaStream_t stream);

}  // namespace ch02
