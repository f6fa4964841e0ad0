/// @file staircase_fastest.cu
/// @brief Chapter 08's last variants and its fastest: async_bc64 and split_tail, the two that read views.
/// (backward_variants.cuh has the machinery; the four staircase_*.cu files split the
/// variants' kernels so that the chapter compiles in parallel.)
#include "08_tensor_core_backward/backward_variants.cuh"

namespace ch08 {

using namespace detail;

ft::BackwardImpl async_bc64() {
  return impl<AsyncBc64, true>("async_bc64", "async with 64 keys a block, 4 warps");
}
ft::BackwardImpl split_tail() {
  return impl<SplitTail, true>(
      "split_tail", "dq_pointer, the last wave's key tiles cut into runs of query tiles (non-causal)");
}

namespace {
void run_fastest(const ft::Problem& p, const ft::BackwardArgs& a, cudaStream_t stream) {
  check_args(p, a);  // the problem first, then the device
  if (std::strcmp(fastest_variant(p.head_dim, ft::max_dynamic_smem()), "split_tail") == 0)
    launch_checked<Fastest, true>(p, a, stream);
  else
    launch_checked<AsyncBc64, true>(p, a, stream);
}
}  // namespace

// Its ledger is split_tail's, the kernel of the GPUs this chapter measured (H100, H200; A100).
const ft::BackwardImpl& fastest() {
  static const ft::BackwardImpl i = [] {
    ft::BackwardImpl f = impl<Fastest, true>("fastest", "split_tail (async_bc64 where its smem does not fit)");
    f.run = run_fastest;
    return f;
  }();
  return i;
}

}  // namespace ch08
