/// @file staircase_early.cu
/// @brief Chapter 08's first variants: plain, wide_kv, async, dq_pass, async_br32.
/// (backward_variants.cuh has the machinery; the four staircase_*.cu files split the
/// variants' kernels so that the chapter compiles in parallel.)
#include "08_tensor_core_backward/backward_variants.cuh"

namespace ch08 {

using namespace detail;

const ft::BackwardImpl& plain() {
  static const ft::BackwardImpl i = impl<Plain>(
      "plain", "tensor cores: S^T = K*Q^T, P^T/dS^T from accumulators, dQ by float32 atomics");
  return i;
}

ft::BackwardImpl wide_kv() {
  return impl<WideKv>("wide_kv", "128 keys a block, 8 warps: half the query-tile reads and atomics");
}
ft::BackwardImpl async() { return impl<Async>("async", "wide_kv + cp.async of the next query tile"); }
ft::BackwardImpl dq_pass() {
  return impl<DqPass>("dq_pass", "async, dQ by a second pass per query tile, no atomics");
}
ft::BackwardImpl async_br32() {
  return impl<AsyncBr32>("async_br32", "async with 32-query tiles at d=64 too");
}

}  // namespace ch08
