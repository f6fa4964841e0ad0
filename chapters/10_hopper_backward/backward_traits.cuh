/// @file backward_traits.cuh
/// @brief Chapter 10's kernel family in one struct: the element type, d, the tiles, the
/// shared memory; every limit the kernels rely on is a static_assert next to its number.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/limits.hpp"  // ft::kMaxSmemPerBlock
#include "sm90/smem_layout.hpp"

namespace ch10 {

template <class Element, int D_>
struct WgmmaBackwardTraits {
  using T = Element;  ///< __nv_bfloat16 or __half
  static constexpr int D = D_;  ///< head dimension d
  /// Queries a query tile: the N of Sᵀ's and dPᵀ's wgmma (m64n64k16), the k of dV's and
  /// dK's, the M of dQ's. 64 keeps Sᵀ and dPᵀ at 32 registers a thread each, beside dK and
  /// dV's 2·d/2 that live across the whole loop.
  static constexpr int Br = 64;
  /// Keys a block: two warpgroups of wgmma's 64 rows.
  static constexpr int Bc = 128;
  static constexpr int kWarpgroups = Bc / ft::sm90::kMmaM;
  static constexpr int kThreads = kWarpgroups * ft::sm90::kWarpgroupThreads;
  using KvTile = ft::sm90::Sw128Tile<Bc, D>;  ///< K and V: a row a key
  using QTile = ft::sm90::Sw128Tile<Br, D>;   ///< Q and dO: a row a query
  using DsTile = ft::sm90::Sw128Tile<Bc, Br>;  ///< dSᵀ: a row a key, one 64-query panel
  /// 1024 bytes to align the first tile (the swizzle's period), K, V, Q, dO, dSᵀ, L and D.
  static constexpr size_t kSmemBytes = size_t(ft::sm90::kAtomBytes) + 2 * KvTile::kBytes + 2 * QTile::kBytes +
                                       DsTile::kBytes + 2 * Br * sizeof(float);

  static_assert(D == 64 || D == 128, "dV's, dK's and dQ's wgmma is m64n{d}k16: the shapes sm90/wgmma.cuh spells out");
  static_assert(Br == ft::sm90::kPanelCols, "dSᵀ's rows are one 128-byte panel: Br = 64 queries");
  static_assert(kSmemBytes <= ft::kMaxSmemPerBlock, "at most 227 KB of shared memory per block");
};

}  // namespace ch10
