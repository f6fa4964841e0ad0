/// @file tail_split.hpp
/// @brief A tail split: which key tiles of a backward run as one block each, and how the last
/// wave's tiles are cut into runs of query tiles, a block each, so that the grid's end keeps
/// the SMs busy (chapter 08's split_tail is the kernel that follows it). Host and device: the
/// launch plans, the kernel follows the plan, and a CPU test checks it.
///
/// The words. A key tile is Bc keys of one head: the work of one block in the variants
/// before split_tail, which walks all the query tiles it sees. A wave is one block on every
/// SM (these kernels hold one block an SM: 255 registers × 256 threads fill the register
/// file). Non-causal, every key tile is the same work, q_tiles query tiles; causal tiles
/// differ (the diagonal), and split_tail leaves them as they were.
#pragma once

#include <algorithm>
#include <cstdint>

#include "sm80/fragment.hpp"  // FT_TC_HD

namespace ft::schedule {

/// How a launch shares out its key tiles, in the grid's order (key tile g of head
/// g / num_kv_tiles). Tiles [0, first) run one block each. Each of the `tiles` after them
/// (the grid's partial last wave) is cut into `parts` runs of its q_tiles query tiles, a
/// block each, right after the others on the grid: block first + j · parts + r runs part r
/// of tile first + j. A part holds only some of the sums over the queries that make dK and
/// dV: it adds them (float32 atomics) into the tile's slot, and store_shared_tiles rounds
/// and stores each slot after the key-block kernel, as convert_dq does dQ.
struct TailSplit {
  int64_t first = 0;        ///< key tiles [0, first): a block each
  int tiles = 0;            ///< key tiles [first, first + tiles): cut into parts; 0: none
  int parts = 1;            ///< runs a cut tile (1: nothing is cut)
  int q_tiles = 0;          ///< query tiles of every key tile: ceil(N / Br) (non-causal)
  float* slots = nullptr;   ///< [tiles][2][Bc][d] float32: dK, dV of the cut tiles, zero on entry
  int64_t slot_floats = 0;  ///< 2 · Bc · d

  int64_t blocks() const { return first + int64_t(tiles) * parts; }  ///< the grid
  int64_t slot_count() const { return parts > 1 ? tiles : 0; }
  /// Part r's query tiles [begin(r), begin(r + 1)): the cut as even as whole tiles allow.
  FT_TC_HD int begin(int r) const { return int(int64_t(r) * q_tiles / parts); }
};

/// The most tiles a plan cuts: the workspace holds this many slots (or one a key tile, for a
/// smaller grid) whatever the GPU, so that its size is the problem's alone and a workspace
/// sized with one GPU current is big enough on another. The last wave holds fewer tiles
/// than the GPU has SMs; 160 covers every GPU that grants split_tail its 162 KB of shared
/// memory a block (A100: 108 SMs, H100 and H200: 132, B200: 148). A GPU whose last wave holds
/// more runs it uncut.
constexpr int kMaxCutTiles = 160;

/// The slots a workspace holds for a problem of num_tiles key tiles of q_tiles query tiles:
/// none causal or with one query tile a key tile (nothing to cut), else min(num_tiles,
/// kMaxCutTiles).
inline int64_t slot_capacity(int64_t num_tiles, int q_tiles, bool causal) {
  return causal || q_tiles < 2 ? 0 : std::min<int64_t>(num_tiles, kMaxCutTiles);
}

/// The plan for num_tiles key tiles of q_tiles query tiles each on a GPU of `sms` SMs (0:
/// none), one block an SM. Causal tiles, a grid of whole waves, a last wave of more than
/// kMaxCutTiles tiles, or one that no cut shortens run as before. Otherwise the tiles of
/// the last wave (num_tiles mod sms) are cut into `parts` runs, the number that makes the
/// cut tiles' rounds of blocks shortest:
/// ceil(tiles · parts / sms) rounds of ceil(q_tiles / parts) query tiles, plus one query
/// tile's time a round for what each part repeats (loading K and V, adding into the slot),
/// against q_tiles for the uncut last wave.
inline TailSplit plan_tail_split(int64_t num_tiles, int q_tiles, int sms, bool causal, int Bc, int d) {
  TailSplit s;
  s.first = num_tiles;
  s.q_tiles = q_tiles;
  s.slot_floats = 2 * int64_t(Bc) * d;
  if (causal || sms <= 0 || num_tiles % sms == 0 || num_tiles % sms > kMaxCutTiles) return s;
  const int tiles = int(num_tiles % sms);
  const auto cost = [&](int parts) {
    const int rounds = int((int64_t(tiles) * parts + sms - 1) / sms);
    return int64_t(rounds) * ((q_tiles + parts - 1) / parts + (parts > 1));
  };
  int best = 1;
  for (int parts = 2; parts <= q_tiles; ++parts)
    if (cost(parts) < cost(best)) best = parts;
  if (best == 1) return s;
  s.first = num_tiles - tiles;
  s.tiles = tiles;
  s.parts = best;
  return s;
}

}  // namespace ft::schedule
