/// @file flash_forward.hpp
/// @brief Chapter 07: FlashAttention-2's fused forward on the tensor cores (bf16 and fp16
/// in and out, float32 accumulation, lse in float32), as a staircase of variants.
#pragma once

#include <vector>

#include "harness/harness.hpp"

namespace ch07 {

/// The fastest variant per head dimension (the alias "ch07" of the C API's ft_forward and the
/// tour's chapter 07): cp.async double buffering, tiles of 128 queries × 64 keys, 4 warps of 32
/// rows, and at d = 128 the rescale of O skipped when no row's max rises.
const ft::ForwardImpl& fastest();

/// plain, padded, swizzled, async, tuned, lazy_rescale (the staircase), fastest, then the
/// tile shapes the tuning measured.
std::vector<ft::ForwardImpl> forward_impls();

}  // namespace ch07
