/// @file tensor_core_backward.cu
/// @brief Chapter 08's list of variants (each changes one thing: the README), which fastest()
/// runs, the public ledger and workspace, and the registration. The variants' kernels are
/// instantiated in staircase_*.cu, four files that compile in parallel; backward_variants.cuh
/// is what they share.
#include "08_tensor_core_backward/tensor_core_backward.hpp"

#include "07_tensor_core_forward/flash_forward.hpp"
#include "08_tensor_core_backward/backward_variants.cuh"
#include "harness/registry.hpp"

namespace ch08 {

using namespace detail;

size_t workspace_bytes(const ft::Problem& p) {
  return size_t(p.elems()) * sizeof(float) + size_t(p.rows()) * sizeof(float);
}

std::vector<ft::KernelTraffic> plain_traffic(const ft::Problem& p) {
  return {dot_traffic(p, true), main_traffic(p, br_for(p.head_dim), 64, true), convert_traffic(p)};
}

// async_bc64 fits every sm_80+ GPU's opt-in shared memory (99 KB and up).
static_assert(AsyncBc64<__nv_bfloat16, 64>::kSmemBytes <= 99 * 1024 &&
                  AsyncBc64<__nv_bfloat16, 128>::kSmemBytes <= 99 * 1024,
              "fastest's fallback fits the smallest sm_80+ GPU");

const char* fastest_variant(int head_dim, size_t smem_optin) {
  const size_t fastest = head_dim == 128 ? Fastest<__nv_bfloat16, 128>::kSmemBytes
                                         : Fastest<__nv_bfloat16, 64>::kSmemBytes;
  return smem_optin >= fastest ? "split_tail" : "async_bc64";
}

std::vector<ft::BackwardImpl> backward_impls() {
  return {plain(),      wide_kv(),        async(),        dq_pass(),      fastest(),
          async_br32(), async_bc64(),     warp_tiles(),   hoisted(),      spread_atomics(),
          pipelined_dk(), late_copy(),    dq_pointer(),   split_tail()};
}

}  // namespace ch08

FT_REGISTER(ch08) {
  // Every variant reads the O and lse of chapter 07's fastest forward.
  const std::string forward = ft::impl_name(ch07::fastest().chapter, ch07::fastest().variant);
  for (const auto& impl : ch08::backward_impls()) {
    const bool fastest = impl.variant == ch08::fastest().variant;
    ft::register_backward(impl, forward, /*headline=*/fastest, /*tour=*/fastest);
  }
}
