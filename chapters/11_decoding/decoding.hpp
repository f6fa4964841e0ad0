/// @file decoding.hpp
/// @brief Chapter 11: decoding, a few query rows a sequence against a long K/V cache (bf16
/// and fp16, d = 64 and 128), as a staircase of variants.
#pragma once

#include <vector>

#include "harness/harness.hpp"

namespace ch11 {

/// The chapter's recommended decode (the alias ch11).
const ft::ForwardImpl& fastest();

/// The staircase, one idea a step, then fastest.
std::vector<ft::ForwardImpl> forward_impls();

/// Splits of the keys for `blocks` blocks of work over `len_kv` keys on `sms` SMs: enough
/// blocks for four a SM, no split under kMinSplitKeys keys, at most kMaxSplits.
int choose_splits(int64_t blocks, int len_kv, int sms);

}  // namespace ch11
