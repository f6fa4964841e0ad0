/// @file strides.hpp
/// @brief Where a tensor's rows lie: the strides of a `[batch, heads, seq_len, head_dim]`
/// view whose head_dim is contiguous, for the kernels that read and write views (the fastest
/// of chapters 07 and 08, through the C API's `*_strided` functions).
///
/// The layout contract's tensors are contiguous `[B, H, N, d]`: head bh = b·H + h starts at
/// bh·N·d and its rows are d apart. A model computes q, k and v in one matrix product whose
/// output rows are tokens, `[B, N, 3, H, d]`, and SDPA's callers pass q as a transposed view
/// of it: head h of batch b starts at b·N·3Hd + h·d, and its rows are 3Hd apart. Copying
/// such a view to the contract's layout costs a read and a write of every element (chapter
/// 08's README measures it in training); a kernel that takes the strides reads it in place.
/// Only where a row starts changes: a row's d elements are still contiguous, so the 16-byte
/// chunks, the tiles in shared memory and every fragment are the ones the chapters draw.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/problem.hpp"

#if defined(__CUDACC__)
#define FT_HOST_DEVICE __host__ __device__
#else
#define FT_HOST_DEVICE
#endif

namespace ft {

/// Element (b, h, n, c) of a tensor is at b·batch + h·head + n·row + c, counted in elements.
struct Strides {
  int64_t batch = 0;
  int64_t head = 0;
  int64_t row = 0;
};

/// The first element of head bh = b·H + h (the index the kernels' grids count) of a tensor
/// with strides s. (A free function, not a member: a member call on a kernel's parameter
/// passes its address.)
FT_HOST_DEVICE inline int64_t head_start(Strides s, int64_t bh, int heads) {
  return bh / heads * s.batch + bh % heads * s.head;
}

/// The layout contract's strides: contiguous [B, H, N, d] of a tensor with `heads` heads of
/// `len` rows.
inline Strides contiguous_strides(const Problem& p, int heads, int len) {
  const int64_t row = p.head_dim, head = row * len;
  return {head * heads, head, row};
}
/// ... of Q, O, dO, dQ: [B, H_q, N_q, d].
inline Strides q_strides(const Problem& p) { return contiguous_strides(p, p.heads_q, p.len_q); }
/// ... of K, V, dK, dV: [B, H_kv, N_kv, d].
inline Strides kv_strides(const Problem& p) { return contiguous_strides(p, p.heads_kv, p.len_kv); }

/// The strides of every tensor a pass touches (a forward uses Q, K, V, O).
struct Layout {
  Strides Q, K, V, O, dO, dQ, dK, dV;
};

/// What a kernel that reads views needs beside its own arguments: every tensor's strides, and
/// H_q and H_kv (a grid counts query heads b·H_q + h; K and V are found by their own head
/// index b·H_kv + h / group). A kernel argument of its own, kept out of the kernels'
/// Params: the kernels' lambdas capture Params by reference, and a struct that size (the
/// Layout is 192 bytes) captured so makes the compiler take the parameters' address and load
/// every one of them into registers, which at the backward's register limit spilled.
struct ViewArgs {
  Layout strides;
  int heads = 1;     ///< H_q
  int heads_kv = 1;  ///< H_kv
};

/// Every tensor contiguous: the layout of the harness, the chapters' programs and the C API's
/// plain functions.
Layout contiguous_layout(const Problem& p);

/// The farthest a view may step along one dimension, (length − 1)·stride elements: the three
/// together then stay below 2^62, and no offset a kernel forms can overflow 64 bits.
constexpr int64_t kMaxReach = int64_t(1) << 60;

/// Throws ft::Unsupported, naming the tensor and what to change, unless `s` is a view the
/// kernels can use for a tensor of problem `p` (of its query side, Q O dO dQ, or with
/// `kv_side` of K V dK dV): no negative stride, none reaching past
/// kMaxReach, a row stride below 2^31; every row start 16-byte aligned (the stride of each
/// dimension longer than 1 a multiple of 16 bytes; a dimension of length 1 is never stepped,
/// so its stride does not matter, as in PyTorch); and, for a tensor the pass writes
/// (`written`), no two elements at one address (else two blocks would race to store them).
void check_strides(const Problem& p, const Strides& s, const char* name, bool written,
                   bool kv_side = false);

/// check_strides on Q, K, V (read) and O (written); with `backward`, O and dO read and dQ,
/// dK, dV written.
void check_layout(const Problem& p, const Layout& l, bool backward);

#if defined(__CUDACC__)
/// Views<Traits>: a kernel's traits, reading and writing views. The kernels of chapters 07
/// and 08 keep the contract's contiguous formulas for where a head's rows are, and replace
/// them under `if constexpr (Tr::kViews)`: with kViews false (every variant of the
/// staircase) they compile to the very instructions that were measured; with kViews (the
/// fastest variants, for the C API's `*_strided` functions) the rows are where the strides
/// say. Two instantiations rather than one that always reads strides: at the 255-register
/// limit of chapter 08's kernels the extra values spilled.
template <class Traits>
struct Views : Traits {
  static constexpr bool kViews = true;
};

/// A contiguous tensor's row stride, as a type: given one, the copies of sm80/cp_async.cuh and
/// sm80/tile_copy.cuh run their contiguous code, with Tile::kCols as the stride. (An int that
/// is D computes the same addresses, but the optimizer learns its value only after inlining,
/// and the kernels compiled from it differed from the measured ones in registers.)
struct ContiguousRows {};

/// The row stride the copies take: ContiguousRows, or a view's stride in elements (< 2^31:
/// check_strides).
template <bool kViews>
using RowStride = std::conditional_t<kViews, int, ContiguousRows>;

template <bool kViews>
__device__ __forceinline__ RowStride<kViews> row_stride(const Strides& s) {
  if constexpr (kViews) return int(s.row);
  else return {};
}
#endif

}  // namespace ft
