/// @file forward_traits.cuh
/// @brief Chapter 09's kernel family in one struct: the element type, d, the tile shape,
/// the warpgroups that split the query tile, the shared-memory tiles, the stages in
/// flight; every limit the kernels rely on is a static_assert next to its number.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/limits.hpp"  // ft::kMaxSmemPerBlock
#include "sm90/smem_layout.hpp"

namespace ch09 {

/// How K and V (and Q) reach shared memory.
enum class Load {
  kCpAsync,  ///< chapter 07's cp.async: every thread copies 16-byte chunks, then a barrier
  kTma,      ///< the copy engine: one thread names a box, an mbarrier counts its bytes in
};

template <class Element, int D_, int Bc_, Load kLoad_ = Load::kCpAsync, int Warpgroups_ = 2, int Stages_ = 2>
struct WgmmaTraits {
  using T = Element;  ///< __nv_bfloat16 or __half
  static constexpr int D = D_;    ///< head dimension d
  static constexpr int Bc = Bc_;  ///< keys per K/V tile: the n of S's wgmma
  static constexpr int kWarpgroups = Warpgroups_;
  static constexpr int Br = ft::sm90::kMmaM * kWarpgroups;  ///< 64 query rows a warpgroup
  static constexpr int kThreads = ft::sm90::kWarpgroupThreads * kWarpgroups;
  static constexpr int kStages = Stages_;  ///< K/V tiles in shared memory: one used, one landing
  static constexpr Load kLoad = kLoad_;
  using QTile = ft::sm90::Sw128Tile<Br, D>;
  using KvTile = ft::sm90::Sw128Tile<Bc, D>;
  /// Q, the K/V stages, an mbarrier a stage (8 bytes each, used by kTma), and 1024 bytes of
  /// slack to align the first tile (the swizzle's period).
  static constexpr size_t kSmemBytes = size_t(ft::sm90::kAtomBytes) + QTile::kBytes +
                                       size_t(kStages) * 2 * KvTile::kBytes + kStages * sizeof(uint64_t);

  static_assert(D == 64 || D == 128, "O's wgmma is m64n{d}k16: the shapes sm90/wgmma.cuh spells out");
  static_assert(Bc == 64 || Bc == 128, "S's wgmma is m64n{Bc}k16");
  static_assert(kStages == 2, "the loop double-buffers: tile j + 1 lands while j is used");
  static_assert(Bc / 2 + D / 2 <= 128, "S and O accumulators leave registers for the rest");
  static_assert(Br <= 256 && Bc <= 256, "a TMA box is at most 256 rows");
  static_assert(kSmemBytes <= ft::kMaxSmemPerBlock, "at most 227 KB of shared memory per block");
};

}  // namespace ch09
