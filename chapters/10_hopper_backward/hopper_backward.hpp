/// @file hopper_backward.hpp
/// @brief Chapter 10: the backward on Hopper's own instructions (bf16 and fp16, d = 64 and
/// 128, sm_90a), as a staircase of variants.
#pragma once

#include <vector>

#include "harness/harness.hpp"

namespace ch10 {

/// The chapter's recommended backward (the alias ch10).
const ft::BackwardImpl& fastest();

/// The staircase, one idea a step, then fastest.
std::vector<ft::BackwardImpl> backward_impls();

}  // namespace ch10
