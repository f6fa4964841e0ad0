/// @file fused_forward.hpp
/// @brief Chapter 04: the fused forward kernel. One kernel reads Q, K, V and writes O and
/// the log-sum-exp; the N×N scores live only in registers and shared memory.
#pragma once

#include <vector>

#include "04_fused_forward/ledger.hpp"
#include "harness.hpp"

namespace ch04 {

/// The plainest correct fused kernel: one thread per query row, K/V tiles in shared memory.
const ft::ForwardImpl& simple();

/// The fast CUDA-core kernel (register-tiled); its O and lse (natural-log log-sum-exp per
/// row, [B,H,N]) are what chapter 05's flash backward starts from.
const ft::ForwardImpl& fast();

/// simple, fast, then the fast kernel's other tile shapes (fast_128x64, fast_128x32, …),
/// registered so that one run on a GPU times them all.
std::vector<ft::ForwardImpl> forward_impls();

}  // namespace ch04
