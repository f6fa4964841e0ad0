/// @file backward_traits.cuh
/// @brief Chapter 10's kernel family in one struct: the element type, d, the tiles, the
/// shared memory; every limit the kernels rely on is a static_assert next to its number.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/limits.hpp"  // ft::kMaxSmemPerBlock
#include "sm90/smem_layout.hpp"

namespace ch10 {

/// Step 10: a consumer's share of a query tile's dQ, 64 rows (wgmma's M) × 64 columns (d/2 at
/// d = 128, split by columns; all of d = 64, split by rows): 32 floats a thread of the
/// warpgroup, laid out by dq_tile_offset (backward_tile.cuh).
constexpr int kDqShareFloats = ft::sm90::kMmaM * 64;

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
  static constexpr bool kSpecialized = false;  ///< every warp loads and computes
  static constexpr bool kViews = false;        ///< contiguous tensors (ft::Views<...> reads views)
  static constexpr bool kLean = false;         ///< every element masked, dSᵀ scaled (step 8 changes both)
  static constexpr int kDqShares = kWarpgroups;  ///< dQ adds a block a query tile: one a warpgroup
  static constexpr bool kDqTiles = false;        ///< dQ's accumulator row by row (see SpecializedBackwardTraits)
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

/// How a block's share of dQ (its 128 keys' part of dS·K, one query tile) reaches the
/// float32 accumulator in device memory, which every K/V tile of the head adds into.
enum class DqAdd {
  kAtomics,  ///< each thread's float2 atomics straight from its accumulator registers
  kBulk,     ///< the share into shared memory, then a warp of the producer's warpgroup has
             ///< the copy engine add it a row at a time (cp.reduce.async.bulk)
};

/// The order in which a consumer issues and waits for a query tile's products.
enum class Schedule {
  kInOrder,     ///< Sᵀ and dPᵀ waited for together, then P and dS, then dV, dK and dQ
  kNextScores,  ///< step 5: the next tile's Sᵀ and dPᵀ issued behind this tile's dQ
  kPUnderDp,    ///< step 7: Sᵀ waited for alone; P computed and dV issued while dPᵀ runs
};

/// Steps 2 onwards (specialized_backward.cuh): warpgroup 0 the producer, warpgroups 1 and 2
/// the consumers, 64 keys each; query tiles through a ring of stages.
template <class Element, int D_, DqAdd kDq_, bool kDeterministic_ = false,
          Schedule kSchedule_ = Schedule::kInOrder, int Br_ = 64, bool kLean_ = false, bool kPersistent_ = false,
          bool kDqTiles_ = false, bool kDqTurns_ = false>
struct SpecializedBackwardTraits {
  using T = Element;
  static constexpr int D = D_;
  /// Queries a tile: 64, as step 1 (the registers: see WgmmaBackwardTraits); step 6, 128 at
  /// d = 64, where Sᵀ's and dPᵀ's 64 registers each still fit beside dK's and dV's 32.
  static constexpr int Br = Br_;
  static constexpr int Bc = 128;  ///< keys a block: two consumer warpgroups of 64
  static constexpr int kConsumers = Bc / ft::sm90::kMmaM;
  static constexpr int kThreads = ft::sm90::kWarpgroupThreads * (1 + kConsumers);  ///< 384
  static constexpr int kConsumerThreads = kConsumers * ft::sm90::kWarpgroupThreads;
  static constexpr int kConsumerWarps = kConsumerThreads / 32;
  /// Query tiles in flight: one read by the consumers, one landing.
  static constexpr int kStages = 2;
  static constexpr DqAdd kDq = kDq_;
  /// Step 4: the key blocks of a head add their shares into a query tile's dQ one after
  /// another, in key order (a counter a query tile in the workspace), so that every run
  /// sums them in the same order and gives the same bits.
  static constexpr bool kDeterministic = kDeterministic_;
  static constexpr Schedule kSchedule = kSchedule_;
  /// Step 5: the next query tile's Sᵀ and dPᵀ issued behind this tile's dQ (their 64
  /// registers live beside Pᵀ, dSᵀ, dQ, dK and dV: only at d = 64 do 240 hold them).
  static constexpr bool kOverlap = kSchedule == Schedule::kNextScores;
  /// Step 8: fewer instructions between the products. Only the tiles that can hold a hidden
  /// (query, key) pair are masked, and dSᵀ is left unscaled: the softmax scale multiplies dK
  /// once at its store and dQ once in its conversion, not every score gradient.
  static constexpr bool kLean = kLean_;
  /// Step 8 at d = 128 also reads L and D two columns a 64-bit load and stores dSᵀ a k-step
  /// an stmatrix: half the shared-memory instructions around P and dS. At d = 64 (128-query
  /// tiles) the same change measured slower (the chapter's case study), so there it is off.
  static constexpr bool kWideShared = kLean && D == 128;
  /// Step 9: one block an SM, each taking key blocks from a counter until none is left (the
  /// kernel's walk over work items, which the other steps take one step of: a block an item).
  /// Once the consumers have added the item's last dQ and arrive on kv_empty, the producer
  /// loads the next item's K and V, then its first query tiles, while the consumers store dK
  /// and dV.
  static constexpr bool kPersistent = kPersistent_;
  static constexpr bool kSpecialized = true;  ///< a producer warpgroup, two consumers
  static constexpr bool kViews = false;       ///< contiguous tensors (ft::Views<...> reads views)
  /// dQ = dS·K over all 128 keys, split between the consumers so that the block adds one
  /// share, not one a warpgroup. A 64-query tile is split by columns: consumer c computes
  /// dQ's columns c·d/2 on (wgmma m64n{d/2}k16). A 128-query tile (step 6) is split by rows:
  /// consumer c computes queries 64c on, all d columns (m64n{d}k16).
  static constexpr bool kDqByRows = Br == kConsumers * ft::sm90::kMmaM;
  /// Step 11 (d = 128): the consumers take turns at dQ. Consumer it % 2 computes the whole of
  /// query tile it's dQ (m64n{d}k16 over all 128 keys, 64 registers a thread), once the other
  /// has arrived with its dSᵀ rows; the other goes on to the next tile's products meanwhile.
  /// dSᵀ gets two buffers, one a turn, so that a tile's dSᵀ is written while the last one's
  /// dQ product still reads the other. One meeting a tile, which only the turn's consumer
  /// waits at, where steps 2-10 had both wait twice.
  static constexpr bool kDqTurns = kDqTurns_;
  static constexpr int kDqCols = kDqByRows || kDqTurns ? D : D / kConsumers;
  /// dSᵀ buffers: one, or one a turn.
  static constexpr int kDsBuffers = kDqTurns ? 2 : 1;
  /// Consumer c's part of a tile's dQ: its first row (of the tile's queries) and column.
  FT_TC_HD static constexpr int dq_row0(int c) { return kDqByRows ? c * ft::sm90::kMmaM : 0; }
  FT_TC_HD static constexpr int dq_col0(int c) { return kDqByRows || kDqTurns ? 0 : c * kDqCols; }
  /// The share a consumer's registers start at, its part of dQ starting at (row0, col0).
  FT_TC_HD static constexpr int first_share(int row0, int col0) {
    return kDqByRows ? row0 / ft::sm90::kMmaM : col0 / kDqCols;
  }
  /// Share s (a 64 × 64 block) of a tile's dQ in the accumulator's layout (dq_tile_offset): its
  /// first row and column, where steps 2-10's consumer s computes it. Step 11's turn computes
  /// both shares, its registers 32 on being the second; the layout, and so the conversion
  /// (dq_tile_place), stay the same.
  FT_TC_HD static constexpr int share_row0(int s) { return kDqByRows ? s * ft::sm90::kMmaM : 0; }
  FT_TC_HD static constexpr int share_col0(int s) { return kDqByRows ? 0 : s * (D / kConsumers); }
  static constexpr int kDqShares = 1;  ///< dQ adds a block a query tile
  /// Registers after setmaxnreg, as chapter 09: the producer 24, each consumer 240 (dK, dV:
  /// 2·d/2; Sᵀ, dPᵀ: 2·Br/2; dQ: 64·kDqCols/128); 128·(24 + 2·240) = 64512 of the launch's
  /// 384·168.
  static constexpr int kProducerRegs = 24;
  static constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;
  static constexpr int kConsumerRegs = (kLaunchRegs * (1 + kConsumers) - kProducerRegs) / kConsumers / 8 * 8;
  using KvTile = ft::sm90::Sw128Tile<Bc, D>;
  using QTile = ft::sm90::Sw128Tile<Br, D>;
  using DsTile = ft::sm90::Sw128Tile<Bc, Br>;
  /// A stage's L and D (a float a query each); its Q and dO tiles are kept apart from them,
  /// every tile on a 1024-byte boundary.
  static constexpr size_t kRowStatsBytes = 2 * Br * sizeof(float);
  /// kBulk's dQ share: Br rows of d floats; two buffers, so that one tile's adds run while
  /// the next is computed. Each row is padded by 32 bytes. A consumer stores its accumulator
  /// a float2 a lane: lane l writes row l/4, columns 2(l%4) and +1 (of an 8-column block), and
  /// shared memory serves a 64-bit store a half-warp at a time (as observed; the CUDA guide
  /// does not promise it), 4 rows × 4 float2 = 128 bytes.
  /// With rows d + 8 floats apart (d·4 bytes is a multiple of the 128 bytes of the 32 banks)
  /// those 4 rows start 8 banks apart and their 8-bank spans fill the 32 banks once; with
  /// 16 bytes of padding (4 banks apart) the spans overlap by half: a 2-way conflict.
  static constexpr int kDqRowFloats = D + 8;
  /// Step 10: dQ's float32 accumulator laid out a query tile at a time in the consumers'
  /// register order (dq_tile_offset, backward_tile.cuh), the buffer exactly so, and the adder
  /// hands the copy engine a whole tile with one bulk add instead of a row at a time;
  /// convert_dq_tiles reads that order back. The consumers store four floats at once (their
  /// registers 4j to 4j + 3 lie together), a warp 512 contiguous bytes.
  static constexpr bool kDqTiles = kDqTiles_;
  static constexpr size_t kDqBytes = kDq != DqAdd::kBulk ? 0
                                     : kDqTiles      ? 2 * size_t(Br) * D * sizeof(float)
                                                     : 2 * size_t(Br) * kDqRowFloats * sizeof(float);
  /// K and V's full and empty barriers, a full and an empty barrier a stage, and a full and
  /// an empty barrier a dQ buffer (kBulk's; allotted always, 32 bytes).
  static constexpr int kBarriers = 2 + 2 * kStages + 2 * 2;
  /// 1024 bytes to align the first tile, K, V, the stages' Q and dO, dSᵀ (kDsBuffers), the
  /// stages' L and D, the dQ buffers, the barriers, step 9's next key block (an int, allotted always).
  static constexpr size_t kSmemBytes = size_t(ft::sm90::kAtomBytes) + 2 * KvTile::kBytes +
                                       kStages * (2 * size_t(QTile::kBytes) + kRowStatsBytes) +
                                       kDsBuffers * size_t(DsTile::kBytes) + kDqBytes + kBarriers * sizeof(uint64_t) +
                                       sizeof(int);

  static_assert(D == 64 || D == 128, "dV's and dK's wgmma is m64n{d}k16, dQ's m64n{d/2}k16 or m64n{d}k16");
  static_assert(Br == 64 || (Br == 128 && D == 64 && !kOverlap),
                "128 queries a tile: Sᵀ's and dPᵀ's 2·64 registers beside dK's and dV's 2·d/2 fit 240 at d = 64, "
                "and leave no room for a second tile's scores (kOverlap)");
  static_assert(Br % ft::sm90::kPanelCols == 0, "dSᵀ's rows are whole 64-query panels");
  static_assert(!(kSchedule == Schedule::kPUnderDp && Br == 128),
                "P in float and packed, dPᵀ in flight, dK and dV: 224 registers before an address "
                "(ptxas serializes the wgmmas and spills: the case study)");
  static_assert(kDqRowFloats * sizeof(float) % 16 == 0, "the copy engine's bulk adds read 16-byte aligned rows");
  static_assert(!kDeterministic || kDq == DqAdd::kBulk, "the ordered adds are the adder warp's (kBulk)");
  static_assert(!kDqTiles || (kDq == DqAdd::kBulk && kLean && !kDeterministic),
                "step 10 is step 9 with the copy engine's adds a tile at a time");
  static_assert(!kDqTiles || ft::sm90::kMmaM * kDqCols == (kDqTurns ? 2 : 1) * kDqShareFloats,
                "a consumer's share of a tile's dQ is 64 × 64 floats, 8 float4 a thread (dq_tile_offset); "
                "step 11's turn is both shares, 16 float4 a thread");
  static_assert(!kDqTurns || (kDqTiles && D == 128),
                "step 11 is step 10 at d = 128, where a tile's dQ is 64 registers a thread: at d = 64 (128-query "
                "tiles) it would be two products of 64 rows, and two 32 KB dSᵀ buffers leave no room");
  static_assert(!kPersistent || (kLean && !kOverlap && !kDeterministic),
                "step 9 walks step 8's kernel (step 5 counts its tiles from 0 a block, step 4 orders blocks)");
  static_assert(!kLean || kSchedule == Schedule::kInOrder, "step 8's unmasked tiles are the in-order schedule's");
  static_assert(!kOverlap || D == 64, "two tiles' scores beside dK and dV: 240 registers hold them at d = 64 only");
  static_assert(kProducerRegs + kConsumers * kConsumerRegs <= kLaunchRegs * (1 + kConsumers),
                "setmaxnreg redistributes the launch's registers: more than they hold would wait forever");
  static_assert(kSmemBytes <= ft::kMaxSmemPerBlock, "at most 227 KB of shared memory per block");
};

}  // namespace ch10
