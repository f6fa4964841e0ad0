/// @file backward.hpp
/// @brief Chapter 05: the attention backward pass, two ways. `materialize()` keeps the N×N
/// probabilities P from its forward pass and runs four matrix products over N×N grids (and dS);
/// `flash()` keeps only O and the log-sum-exp L and recomputes P tile by tile on chip.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "harness/harness.hpp"
#include "core/problem.hpp"
#include "harness/traffic.hpp"

namespace ch05 {

/// The baseline: its forward stores P (B·H·N² floats) in the workspace; the backward forms
/// dV = Pᵀ·dO, dP = dO·Vᵀ, dS = P∘(dP − D), dQ = scale·dS·K, dK = scale·dSᵀ·Q with chapter
/// 02's tiled matrix product. Workspace O(N²): P, dP (dS overwrites it) and D.
const ft::BackwardImpl& materialize();

/// The flash backward: forward = chapter 04's fast kernel (O and L only); backward = D, then
/// one kernel per key tile that recomputes P and adds its share of dQ with atomicAdd.
/// Workspace O(N): D.
const ft::BackwardImpl& flash();

/// flash() with plain loads and stores instead of cp.async (variant "flash_sync",
/// copy_sync.cuh against copy_async.cuh): the next query tile is still loaded right after
/// dK, but through registers, so the threads wait for it instead of forming dQ meanwhile.
/// The same bytes, the same kernel otherwise: what the overlapped copy buys.
const ft::BackwardImpl& flash_sync();

/// Like flash(), but dQ comes from a second kernel that owns a query tile and loops over the
/// key tiles (no atomics, deterministic; S, P and dP are recomputed a second time).
const ft::BackwardImpl& flash_dq_pass();

/// flash() with 128 keys per block instead of 64 (variant "flash_bc128"; at d = 128, where
/// 128 keys do not fit, the same kernel as flash()): each Q/dO tile loaded serves twice the
/// keys and dQ takes half the atomic adds, at one block per SM instead of two. A tuning
/// point for the GPU run to settle.
const ft::BackwardImpl& flash_wide_keys();

/// materialize(), flash(), flash_sync(), flash_dq_pass(), flash_wide_keys(): the order the
/// program runs and prints them.
std::vector<ft::BackwardImpl> backward_impls();

/// The flash backward's tile (flash_backward.cuh: `Tiles<d, Br, Bc>`, which checks any
/// shape with its static_asserts): kFlashBr query rows and kFlashBc keys per tile at every d
/// (flash, flash_sync, flash_dq_pass); flash_wide_keys() has kWideKeysBc keys a block at
/// d ≤ 64. The ledgers read them, and so do the ledger tests (test_ledger.cpp).
constexpr int kFlashBr = 64;
constexpr int kFlashBc = 64;
constexpr int kWideKeysBc = 128;

/// The materializing forward on its own (S = scale·Q·Kᵀ, softmax in place → P, O = P·V),
/// the `forward` of materialize(); its workspace is materialize()'s.
const ft::ForwardImpl& materialize_forward();

/// D = rowsum(dO∘O) over `rows` rows of d floats (rows = B·H·N), one warp per row; also
/// sets `zero_dQ` (rows × d floats) to zero when it is given. Launches on `stream` without
/// synchronising.
void compute_D(const float* O, const float* dO, float* D, int64_t rows, int d,
               cudaStream_t stream, float* zero_dQ = nullptr);

// ---- Memory ledgers (formulas in B, H, N, d and the tile sizes; README explains them) ----

/// Workspace of materialize(): P and dP (B·H·N² floats each) plus D (B·H·N floats).
size_t materialize_workspace_bytes(const ft::Problem& p);
/// Workspace of flash(), flash_sync() and flash_dq_pass(): D only (B·H·N floats).
size_t flash_workspace_bytes(const ft::Problem& p);

/// The materializing forward's kernels: S = scale·Q·Kᵀ, the in-place softmax, O = P·V.
std::vector<ft::KernelTraffic> materialize_forward_traffic(const ft::Problem& p);
/// materialize()'s backward kernels: dV, dP, D, dS, dQ, dK.
std::vector<ft::KernelTraffic> materialize_traffic(const ft::Problem& p);
/// flash()'s backward: D (clearing dQ), flash_backward_atomic_dq.
std::vector<ft::KernelTraffic> flash_traffic(const ft::Problem& p);
/// flash_sync()'s backward: flash_traffic(), its kernel flash_backward_atomic_dq_sync.
std::vector<ft::KernelTraffic> flash_sync_traffic(const ft::Problem& p);
/// flash_dq_pass()'s backward: D, flash_backward_dkdv, flash_backward_dq.
std::vector<ft::KernelTraffic> flash_dq_pass_traffic(const ft::Problem& p);
/// flash_wide_keys()'s backward: as flash_traffic() with Bc = 128.
std::vector<ft::KernelTraffic> flash_wide_keys_traffic(const ft::Problem& p);

}  // namespace ch05
