/// @file opaque.cuh
/// @brief A 64-bit value the compiler cannot see through, so that constant offsets added to
/// it stay immediates in the instructions that use it.
///
/// Given an index `i = lane_part + tile_part` and then accesses at `base + i + 8`,
/// `base + i + 1032`, ..., the optimizer is free to fold everything into one expression per
/// access (`base + 4·(lane_part | 1032)`, say, where it proves the bits disjoint) and compute
/// each 64-bit address afresh: five or six integer instructions an access. Passed through
/// opaque(), i is a value it knows nothing about, so `base + i` is computed once and each
/// access is that register plus an immediate in the instruction itself. (Hide the index, not
/// the pointer: a pointer through inline asm loses its address space, and the accesses turn
/// into generic ones.)
#pragma once

#include <cstdint>

namespace ft::tc {

__device__ __forceinline__ int64_t opaque(int64_t v) {
  asm("mov.b64 %0, %0;" : "+l"(v));  // not volatile: a pure function of v, free to move or merge
  return v;
}

}  // namespace ft::tc
