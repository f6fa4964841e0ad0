/// @file strides.cpp
#include "core/strides.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include "core/check.cuh"

namespace ft {

Layout contiguous_layout(const Problem& p) {
  const Strides q = q_strides(p), kv = kv_strides(p);
  return {q, kv, kv, q, q, q, kv, kv};  // Q K V O dO dQ dK dV
}

void check_strides(const Problem& p, const Strides& s, const char* name, bool written,
                   bool kv_side) {
  const int heads = kv_side ? p.heads_kv : p.heads_q, len = kv_side ? p.len_kv : p.len_q;
  const std::string who = std::string(name) + "'s strides (batch " + std::to_string(s.batch) +
                          ", head " + std::to_string(s.head) + ", row " + std::to_string(s.row) +
                          " elements)";
  // The dimensions the kernels step through, with their lengths; head_dim is contiguous.
  std::array<std::pair<int64_t, int64_t>, 3> dims = {
      {{s.batch, p.batch}, {s.head, heads}, {s.row, len}}};
  const int64_t chunk = 16 / int64_t(dtype_bytes(p.dtype));  // elements in 16 bytes
  if (len > 1 && s.row > INT32_MAX)
    throw Unsupported(who + ": the row stride must be below 2^31 elements (the kernels step "
                      "from row to row in 32-bit arithmetic)");
  for (const auto& [stride, length] : dims) {
    if (stride < 0)
      throw Unsupported(who + ": a negative stride (a flipped view) is not supported: pass it "
                        ".contiguous()");
    if (length > 1 && stride > kMaxReach / (length - 1))
      throw Unsupported(who + ": a view that spans more than 2^60 elements is not supported");
    if (length > 1 && stride % chunk != 0)
      throw Unsupported(who + ": every stride of a dimension longer than 1 must be a multiple of " +
                        std::to_string(chunk) + " elements (16 bytes, so that every row starts "
                        "16-byte aligned): pass it .contiguous()");
  }
  if (!written) return;
  // No element written twice: ordered by stride, each dimension's step must clear every
  // offset the dimensions below it reach (then the offset of (b, h, n, c) is unique).
  std::sort(dims.begin(), dims.end());
  int64_t reach = p.head_dim - 1;
  for (const auto& [stride, length] : dims) {
    if (length == 1) continue;
    if (stride <= reach)
      throw Unsupported(who + ": an output's elements must not overlap (a stride of " +
                        std::to_string(stride) + " steps onto elements the smaller strides "
                        "already reach, up to offset " + std::to_string(reach) +
                        "): pass an output from torch.empty");
    reach += (length - 1) * stride;
  }
}

void check_layout(const Problem& p, const Layout& l, bool backward) {
  check_strides(p, l.Q, "Q", false);
  check_strides(p, l.K, "K", false, true);
  check_strides(p, l.V, "V", false, true);
  check_strides(p, l.O, "O", !backward);
  if (!backward) return;
  check_strides(p, l.dO, "dO", false);
  check_strides(p, l.dQ, "dQ", true);
  check_strides(p, l.dK, "dK", true, true);
  check_strides(p, l.dV, "dV", true, true);
}

}  // namespace ft
