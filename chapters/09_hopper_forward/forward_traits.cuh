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
  static constexpr bool kSpecialized = false;  ///< every warp loads and computes
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

/// Steps 3 to 5: how the two consumer warpgroups of a warp-specialized block share the
/// tensor cores, and how each overlaps its own products with its softmax.
enum class Schedule {
  kFree,      ///< step 3: each issues its products when ready; the warp scheduler interleaves
  kPingPong,  ///< step 4: they take turns (named barriers), one's softmax under the other's products
  kOverlap,   ///< step 5: ping-pong, and each one's softmax of tile j + 1 under its own P_j·V_j
};

/// The warp-specialized kernels (specialized_forward.cuh): warpgroup 0 the producer (one
/// thread issues every copy), warpgroups 1 and 2 the consumers, 64 query rows each.
template <class Element, int D_, Schedule kSchedule_, bool kPersistent_ = false, int Stages_ = 3,
          int Consumers_ = 2>
struct SpecializedTraits {
  using T = Element;
  static constexpr int D = D_;
  static constexpr int Bc = 128;  ///< keys a K/V tile: S's wgmma is m64n128k16
  /// Consumer warpgroups: two (128 query rows a block), or three (192: K and V reused by
  /// more rows, more warps to hide the exponentials; only at d = 64 do the registers allow it).
  static constexpr int kConsumers = Consumers_;
  static constexpr int Br = ft::sm90::kMmaM * kConsumers;
  static constexpr int kThreads = ft::sm90::kWarpgroupThreads * (1 + kConsumers);  ///< 384 or 512
  static constexpr int kConsumerWarps = kConsumers * ft::sm90::kWarpgroupThreads / 32;
  /// K/V tiles in shared memory: the producer's lead. Three, where step 2 had two: once
  /// the producer is free to run ahead, a third stage hides the copies' latency that two
  /// did not (measured on the H200, bf16, d = 128, N = 16384, non-causal: 543-588 TFLOP/s
  /// with two stages, 667-678 with three, steps 3-5 alike, two runs; plots/results/h200/
  /// ch09_stages.csv). At d = 128 three stages take 225 KB of the 227; four, at d = 64,
  /// measured no faster than three.
  static constexpr int kStages = Stages_;
  static constexpr Schedule kSchedule = kSchedule_;
  /// Step 6: a block an SM, each walking pairs of query tiles (specialized_forward.cuh's
  /// TileOrder); the next tile's Q and K/V copied while this one's output is stored.
  /// Otherwise a block a tile.
  static constexpr bool kPersistent = kPersistent_;
  static constexpr Load kLoad = Load::kTma;
  static constexpr bool kSpecialized = true;  ///< a producer warpgroup, two consumers
  /// Registers a thread after setmaxnreg (sm90/warp_roles.cuh): the producer keeps 24 (a
  /// loop, coordinates, barrier addresses), each consumer takes 240 (S: 64, O: up to 64, P:
  /// 32, the softmax's state); 128·(24 + 2·240) = 64512 of the SM's 65536.
  static constexpr int kProducerRegs = 24;
  /// Registers a thread at launch: the SM's 65536 over the block's threads, rounded down to
  /// a multiple of 8 (168 for 384 threads, 128 for 512). setmaxnreg only moves registers
  /// within this pool: a consumer's .inc waits until the producer's .dec has freed enough.
  static constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;
  /// What the pool leaves the consumers once the producer has dropped to kProducerRegs, a
  /// multiple of 8: (3·168 − 24)/2 = 240 for two consumers, (4·128 − 24)/3 → 160 for three.
  static constexpr int kConsumerRegs = (kLaunchRegs * (1 + kConsumers) - kProducerRegs) / kConsumers / 8 * 8;
  using QTile = ft::sm90::Sw128Tile<Br, D>;
  using KvTile = ft::sm90::Sw128Tile<Bc, D>;
  /// Q's full and empty barriers, then a full and an empty barrier a stage.
  static constexpr int kBarriers = 2 + 2 * kStages;
  /// 1024 bytes of slack to align the first tile, Q, the stages, the barriers.
  static constexpr size_t kSmemBytes = size_t(ft::sm90::kAtomBytes) + QTile::kBytes +
                                       size_t(kStages) * 2 * KvTile::kBytes + kBarriers * sizeof(uint64_t);

  static_assert(D == 64 || D == 128, "O's wgmma is m64n{d}k16: the shapes sm90/wgmma.cuh spells out");
  static_assert(kStages >= 2, "the producer fills one stage while the consumers read another");
  static_assert(kConsumers == 2 || (kConsumers == 3 && D == 64),
                "three consumers only at d = 64: at d = 128 S, O and P need more than 160 registers");
  static_assert(Br <= 256, "a TMA box is at most 256 rows");
  static_assert(kProducerRegs + kConsumers * kConsumerRegs <= kLaunchRegs * (1 + kConsumers),
                "setmaxnreg redistributes the launch's registers: more than they hold would wait forever");
  static_assert(kSmemBytes <= ft::kMaxSmemPerBlock, "at most 227 KB of shared memory per block");
};

}  // namespace ch09
