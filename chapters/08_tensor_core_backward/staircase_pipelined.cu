/// @file staircase_pipelined.cu
/// @brief Chapter 08's pipelined variants: pipelined_dk, late_copy, dq_pointer.
/// (backward_variants.cuh has the machinery; the four staircase_*.cu files split the
/// variants' kernels so that the chapter compiles in parallel.)
#include "08_tensor_core_backward/backward_variants.cuh"

namespace ch08 {

using namespace detail;

ft::BackwardImpl pipelined_dk() {
  return impl<PipelinedDk>("pipelined_dk", "spread_atomics, dK's fragments loaded a k-step ahead");
}
ft::BackwardImpl late_copy() {
  return impl<LateCopy>("late_copy", "pipelined_dk, the next query tile's copies after S's product");
}
ft::BackwardImpl dq_pointer() {
  return impl<DqPointer>("dq_pointer", "late_copy, dQ's atomics at immediate offsets from one pointer");
}

}  // namespace ch08
