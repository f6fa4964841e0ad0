/// @file problem.cpp
#include "problem.hpp"

#include "check.cuh"

namespace ft {

void Problem::validate() const {
  auto fail = [&](const std::string& what) { throw Unsupported(what + " (" + describe() + ")"); };
  if (batch < 1) fail("batch must be >= 1, got " + std::to_string(batch));
  if (heads < 1) fail("heads must be >= 1, got " + std::to_string(heads));
  if (seq_len < 1 || seq_len > kMaxSeqLen)
    fail("seq_len must be in [1, " + std::to_string(kMaxSeqLen) + "], got " +
         std::to_string(seq_len));
  if (head_dim < 1 || head_dim > kMaxHeadDim)
    fail("head_dim must be in [1, " + std::to_string(kMaxHeadDim) + "], got " +
         std::to_string(head_dim));
  if (int(dtype) < 0 || int(dtype) > int(DType::Float16))
    fail("dtype must be 0 (float32), 1 (bf16) or 2 (fp16), got " + std::to_string(int(dtype)));
  if (!std::isfinite(scale)) fail("scale must be finite (0 means 1/sqrt(head_dim))");
  // The fused kernels track the running maximum of the raw scores Q·Kᵀ and mask with −∞
  // before scaling: both are right only for a positive scale (a negative one turns −∞ into
  // +∞ and the maximum into the minimum).
  if (scale < 0) fail("scale must be >= 0 (0 means 1/sqrt(head_dim)), got " + std::to_string(scale));
  // B and H are below 2^31 each, so B·H is exact in 64 bits; B·H·N is checked without
  // forming it when it could overflow: B·H > kMaxRows / N already means too many rows.
  if (int64_t(batch) * heads > kMaxRows / seq_len)
    fail("batch·heads·seq_len must be at most 2^31 - 1 query rows");
}

}  // namespace ft
