/// @file fill.cuh
/// @brief Random inputs drawn on the GPU, for measurements that do not verify (--no-verify):
/// a decode cache of tens of gigabytes is filled in milliseconds where the host's generator
/// and the copy took minutes. Each element is a hash of its index and a stream number, so the
/// values do not depend on the grid that writes them, and a kernel that writes a tensor in
/// another layout (chapter 11's paged cache) can write the same numbers.
#pragma once

#include <cstdint>

#include "core/dtype.hpp"

namespace ft {

/// A value in [0, 1) from (index, stream), 24 random bits: SplitMix64's finalizer over an
/// odd-multiplier mix of the two (the multipliers keep nearby streams apart).
__host__ __device__ inline float hash_unit(uint64_t index, uint64_t stream) {
  uint64_t x = index * 0x9E3779B97F4A7C15ull + stream * 0xD1B54A32D192ED03ull;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return float(x & 0xFFFFFF) / float(1 << 24);
}

class DeviceTensor;

/// Fills `t` with values uniform in [lo, hi) (hash_unit of each element's index and
/// `stream`), rounded to its element type; asynchronous on the default stream.
void fill_uniform(DeviceTensor& t, uint64_t stream, float lo, float hi);

}  // namespace ft
