/// @file hopper_forward.hpp
/// @brief Chapter 09: the fused forward on Hopper's own instructions (bf16 and fp16,
/// d = 64 and 128, sm_90a), as a staircase of variants.
#pragma once

#include <vector>

#include "harness/harness.hpp"

namespace ch09 {

/// The chapter's recommended forward (the alias ch09).
const ft::ForwardImpl& fastest();

/// The staircase, one idea a step, then fastest.
std::vector<ft::ForwardImpl> forward_impls();

}  // namespace ch09
