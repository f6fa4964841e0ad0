/// @file tensor_core_backward.hpp
/// @brief Chapter 08: FlashAttention-2's backward on the tensor cores (bf16 and fp16 in and
/// out, float32 accumulation), paired with chapter 07's fastest forward.
#pragma once

#include <vector>

#include "harness/harness.hpp"
#include "core/problem.hpp"
#include "harness/traffic.hpp"

namespace ch08 {

/// The first variant, "plain": D = rowsum(dO∘O) (and dQ's float32 accumulator zeroed),
/// then one block per 64 keys with dK, dV in registers walking the query tiles (4 warps,
/// swizzled shared tiles, synchronous loads), dQ added by float2 atomics into the float32
/// accumulator, and a last kernel that rounds dQ to the dtype. d = 64 or 128, sm_80+.
const ft::BackwardImpl& plain();

/// The fastest measured variant (README, "Measured on the H200"): the alias "ch08" of the C
/// API's ft_backward, which the Python module calls off Hopper. `split_tail`, on a GPU that grants a
/// block its shared memory; else `async_bc64` (fastest_variant). Its ledger is
/// split_tail's.
const ft::BackwardImpl& fastest();

/// Which variant fastest() runs at head dim d on a GPU whose blocks may opt in to
/// `smem_optin` bytes of shared memory: "split_tail" (165,888 bytes at d = 64, 164,864 at
/// d = 128) where it fits, as on the H100, H200 and A100; else "async_bc64" (58,368 and
/// 71,168 bytes: the sm_86 and sm_89 GPUs' 99 KB take it), the fastest variant measured
/// that fits there.
const char* fastest_variant(int head_dim, size_t smem_optin);

/// Every variant, in the order the program runs them (each changes one thing: README).
std::vector<ft::BackwardImpl> backward_impls();

/// Workspace of every variant but dq_pass and split_tail: dQ's float32 accumulator (B·H·N·d
/// floats) first, then D (B·H·N floats). split_tail pads D to 4 floats and puts after it
/// room for the slots of the key tiles any GPU's plan may cut (tail_split.hpp,
/// slot_capacity: the problem's alone).
size_t workspace_bytes(const ft::Problem& p);

/// The ledger of plain(): dot_dO_O_tc, flash_backward_tc, convert_dq (README, "The ledger").
std::vector<ft::KernelTraffic> plain_traffic(const ft::Problem& p);

}  // namespace ch08
