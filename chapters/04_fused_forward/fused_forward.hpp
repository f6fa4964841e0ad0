/// @file fused_forward.hpp
/// @brief Chapter 04: the fused forward kernel. One kernel reads Q, K, V and writes O and
/// the log-sum-exp; the N×N scores live only in registers and shared memory.
#pragma once

#include <vector>

#include "harness/traffic.hpp"
#include "harness/harness.hpp"

namespace ch04 {

/// The plainest correct fused kernel: one thread per query row, K/V tiles in shared memory.
const ft::ForwardImpl& simple();

/// The fast CUDA-core kernel (register-tiled); its O and lse (natural-log log-sum-exp per
/// row, [B,H,N]) are what chapter 05's flash backward starts from.
const ft::ForwardImpl& fast();

/// The tile of fast() at every head dimension: Br query rows per block, Bc keys per K/V
/// tile (`DefaultTiles` in fused_forward.cu; register_tiles.cuh checks any shape with its
/// static_asserts). Its ledger reads them, and so does the ledger test of the default shape.
constexpr int kFastBr = 128;
constexpr int kFastBc = 32;

/// simple, fast, then the fast kernel's other tile shapes (fast_128x64, fast_64x64, fast_64x32),
/// registered so that one run on a GPU times them all.
std::vector<ft::ForwardImpl> forward_impls();

}  // namespace ch04
