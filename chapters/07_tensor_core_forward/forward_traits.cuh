/// @file forward_traits.cuh
/// @brief Chapter 07's kernel family in one struct: the element type, the tile shape, how
/// the warps split the query tile, the shared-memory layout and how many K/V tiles are in
/// flight. Every variant of the chapter is one of these (flash_forward.cu lists them), and
/// every limit the kernel relies on is a static_assert here, next to the number it limits.
#pragma once

#include <cstddef>

#include "core/limits.hpp"  // ft::kMaxSmemPerBlock
#include "sm80/fragment.hpp"
#include "sm80/swizzle.hpp"
#include "sm80/tile_copy.cuh"

namespace ch07 {

/// How the next K/V tile reaches shared memory (sm80/tile_copy.cuh): kSync, plain loads then a
/// barrier; kAsync, cp.async into a second buffer while the tensor cores use the current one.
using ft::tc::Copy;

/// What the online softmax does to O when a tile leaves a row's max where it was.
enum class Rescale {
  kAlways,     ///< O *= alpha for every row at every tile (alpha = 1 then: wasted multiplies)
  kWhenRaised, ///< skip the multiplies when no row of the warp raised its max (a vote)
};

template <class Element, int D_, int Br_, int Bc_, int Warps_, template <int> class Layout_,
          Copy kCopy_, Rescale kRescale_ = Rescale::kAlways>
struct ForwardTraits {
  using T = Element;           ///< __nv_bfloat16 or __half: Q, K, V, O in device memory
  static constexpr int D = D_;    ///< head dimension d
  static constexpr int Br = Br_;  ///< query rows per block (the query tile)
  static constexpr int Bc = Bc_;  ///< keys per K/V tile
  static constexpr int kWarps = Warps_;
  static constexpr Copy kCopy = kCopy_;
  static constexpr Rescale kRescale = kRescale_;
  using Tile = Layout_<D>;  ///< where (row, col) of a Q, K or V tile sits in shared memory
  /// Contiguous tensors (the layout contract); ft::Views<...> of these traits read views.
  static constexpr bool kViews = false;
  /// Self-attention (len_q = len_kv, heads_q = heads_kv); KeyValue<...> of these traits
  /// computes two lengths and grouped heads.
  static constexpr bool kKeyValue = false;

  static constexpr int kThreads = kWarps * ft::tc::kLanes;
  /// FlashAttention-2's split: warp w owns query rows [w·Br/W, (w+1)·Br/W) of the tile, so
  /// every row's max, sum and output stay inside one warp (no shared-memory reductions),
  /// while all warps share each K/V tile.
  static constexpr int kRowsPerWarp = Br / kWarps;
  static constexpr int kMTiles = kRowsPerWarp / ft::tc::kMmaM;  ///< 16-row tiles per warp
  static constexpr int kKSteps = D / ft::tc::kMmaK;    ///< k-steps of S = Q·Kᵀ (over d)
  static constexpr int kSTiles = Bc / ft::tc::kMmaN;   ///< 8-key accumulator tiles of S
  static constexpr int kPvSteps = Bc / ft::tc::kMmaK;  ///< k-steps of O += P·V (over keys)
  static constexpr int kOTiles = D / ft::tc::kMmaN;    ///< 8-column accumulator tiles of O
  /// Q's A fragments stay in registers for the whole loop when a warp owns one 16-row tile
  /// (16 registers at d = 64, 32 at d = 128); with 32 rows a warp they are re-read from
  /// shared memory at every K/V tile, as FlashAttention-2 does, to leave the registers to
  /// the S and O accumulators (which then take up to 192 of a lane's 255).
  static constexpr bool kQInRegisters = kMTiles == 1;
  /// K/V buffers: one, or two with cp.async (load tile j+1 while tile j is computed).
  static constexpr int kStages = kCopy == Copy::kAsync ? 2 : 1;

  static constexpr int kQBytes = ft::tc::tile_bytes<Tile>(Br);
  static constexpr int kKvBytes = ft::tc::tile_bytes<Tile>(Bc);  ///< one K (or V) tile
  static constexpr size_t kSmemBytes = size_t(kQBytes) + size_t(2 * kStages) * kKvBytes;

  static_assert(Br % (kWarps * ft::tc::kMmaM) == 0, "each warp owns whole 16-row tiles");
  static_assert(Bc % ft::tc::kMmaK == 0 && D % ft::tc::kMmaK == 0, "whole k-steps");
  static_assert(kSTiles % 2 == 0 && kOTiles % 2 == 0, "B fragments are loaded in pairs (x4)");
  static_assert(kMTiles * (kSTiles + kOTiles) * 4 <= 192,
                "S and O accumulators must leave registers for everything else (255 max)");
  static_assert(kSmemBytes <= ft::kMaxSmemPerBlock, "at most 227 KB of shared memory per block (sm_90)");
};

/// KeyValue<Traits>: the same kernel for queries and keys of two lengths (the causal diagonal
/// aligned either way) and for grouped heads, each an index in the kernel (flash_forward.cuh).
/// A second instantiation rather than one kernel for all: at d = 128 the extra values the
/// general kernel keeps live cost the self-attention kernel 5-8% of its time on the H200,
/// so self-attention keeps the kernel that was measured.
template <class Traits>
struct KeyValue : Traits {
  static constexpr bool kKeyValue = true;
};

}  // namespace ch07
