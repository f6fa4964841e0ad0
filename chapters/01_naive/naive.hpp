/// @file naive.hpp
/// @brief Chapter 01: attention as three kernels, with the N×N score grid in device memory.
/// The baseline every later chapter is measured against.
#pragma once

#include <vector>

#include "harness/harness.hpp"
#include "core/problem.hpp"
#include "harness/traffic.hpp"

namespace ch01 {

/// S = scale·Q·Kᵀ, P = softmax(S) and O = P·V, one thread per output element (per row for
/// the softmax). Workspace: the B·H·N·N float grid, which holds S and then P in place.
const ft::ForwardImpl& naive();

/// Every forward implementation of this chapter (just naive()).
std::vector<ft::ForwardImpl> forward_impls();

/// The chapter's memory ledger: one line per kernel, requested and DRAM bytes, FLOPs.
std::vector<ft::KernelTraffic> traffic(const ft::Problem& p);

}  // namespace ch01
