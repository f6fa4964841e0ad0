/// @file problem.cpp
#include "core/problem.hpp"

#include "core/check.cuh"

namespace ft {

std::string Problem::describe() const {
  const auto n = [](int x) { return std::to_string(x); };
  std::string s = "B=" + n(batch);
  s += grouped() ? " Hq=" + n(heads_q) + " Hkv=" + n(heads_kv) : " H=" + n(heads_q);
  s += same_lengths() ? " N=" + n(len_q) : " Nq=" + n(len_q) + " Nkv=" + n(len_kv);
  s += " d=" + n(head_dim);
  s += causal ? (same_lengths() ? " causal" : std::string(" causal(") + causal_align_name(align) + ")")
              : " non-causal";
  if (dtype != DType::Float32) s += std::string(" ") + dtype_name(dtype);
  return s;
}

void Problem::validate() const {
  auto fail = [&](const std::string& what) { throw Unsupported(what + " (" + describe() + ")"); };
  const auto in_range = [&](int v, int hi, const char* name) {
    if (v < 1 || v > hi)
      fail(std::string(name) + " must be in [1, " + std::to_string(hi) + "], got " + std::to_string(v));
  };
  if (batch < 1) fail("batch must be >= 1, got " + std::to_string(batch));
  if (heads_q < 1) fail("heads_q must be >= 1, got " + std::to_string(heads_q));
  if (heads_kv < 1) fail("heads_kv must be >= 1, got " + std::to_string(heads_kv));
  if (heads_q % heads_kv != 0)
    fail("heads_q must be a multiple of heads_kv (each key/value head serves heads_q / heads_kv "
         "query heads), got " + std::to_string(heads_q) + " and " + std::to_string(heads_kv));
  in_range(len_q, kMaxSeqLen, "len_q");
  in_range(len_kv, kMaxSeqLen, "len_kv");
  in_range(head_dim, kMaxHeadDim, "head_dim");
  if (int(dtype) < 0 || int(dtype) > int(DType::Float16))
    fail("dtype must be 0 (float32), 1 (bf16) or 2 (fp16), got " + std::to_string(int(dtype)));
  if (int(align) < 0 || int(align) > int(CausalAlign::BottomRight))
    fail("causal alignment must be 0 (top-left) or 1 (bottom-right), got " +
         std::to_string(int(align)));
  if (!std::isfinite(scale)) fail("scale must be finite (0 means 1/sqrt(head_dim))");
  // The fused kernels track the running maximum of the raw scores Q·Kᵀ and mask with −∞
  // before scaling: both are right only for a positive scale (a negative one turns −∞ into
  // +∞ and the maximum into the minimum).
  if (scale < 0) fail("scale must be >= 0 (0 means 1/sqrt(head_dim)), got " + std::to_string(scale));
  // B and H are below 2^31 each, so B·H is exact in 64 bits; B·H·N is checked without
  // forming it when it could overflow: B·H > kMaxRows / N already means too many rows.
  if (int64_t(batch) * heads_q > kMaxRows / len_q)
    fail("batch·heads_q·len_q must be at most 2^31 - 1 query rows");
  if (int64_t(batch) * heads_kv > kMaxRows / len_kv)
    fail("batch·heads_kv·len_kv must be at most 2^31 - 1 key rows");
}

}  // namespace ft
