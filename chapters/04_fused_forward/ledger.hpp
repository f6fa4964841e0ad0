/// @file ledger.hpp
/// @brief Chapter 04's memory ledger as a plain host function (no CUDA needed), so that
/// the CPU tests can check its formulas by hand.
#pragma once

#include "problem.hpp"
#include "traffic.hpp"

namespace ch04 {

/// Key (and value) rows one head's blocks load in total: each query tile of Br rows loads
/// K/V tiles of Bc rows until its last visible key (all N keys; causal: key q0 + Br − 1),
/// rows past N excluded (they are zero-filled, not read).
double kv_rows_loaded(const ft::Problem& p, int Br, int Bc);

/// The ledger line of a fused forward kernel with query tiles of Br rows and K/V tiles of
/// Bc rows. Requested: Q once, K and V once per query tile (kv_rows_loaded), O and lse
/// once. DRAM: K/V re-reads hit L2 while one head's K+V (2·N·d elements) fits, so Q, K,
/// V, O and lse cross DRAM once. FLOPs: the papers' 4·N²·d per head, halved causal.
/// Elements are of the problem's dtype (4 bytes in chapter 04, 2 in chapter 07's bf16/fp16);
/// the lse is float32 always. Chapter 07 reuses this ledger for its tensor-core kernels.
ft::KernelTraffic fused_forward_traffic(const ft::Problem& p, const char* kernel, int Br, int Bc);

}  // namespace ch04
