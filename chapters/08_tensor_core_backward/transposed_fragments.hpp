/// @file transposed_fragments.hpp
/// @brief Chapter 08's index math, host and device: where a warp's dSᵀ accumulators are
/// written in shared memory, and where the dQ product reads dS back from there with
/// ldmatrix.trans. The kernel (flash_backward_tc.cuh) and the CPU test (test_ledger.cpp,
/// which emulates the loads lane by lane) call the same functions.
///
/// The block owns Bc keys; warp w owns keys [16w, 16w + 16). It computes the scores
/// transposed, Sᵀ = K·Qᵀ (rows: its 16 keys, columns: the Br queries of the tile), so its
/// accumulator tile nt holds keys × queries nt·8 .. nt·8 + 7, lane l at key l/4 (+8), queries
/// 2·(l%4), +1 (sm80/fragment.hpp, mma_c_coord). dSᵀ has the same arrangement; it is stored
/// as a [key][query] tile, one 32-bit pair per lane and half.
#pragma once

#include "sm80/fragment.hpp"

namespace ch08 {

/// (key, query) in the stored dSᵀ tile of element pair `half` (0: c0,c1; 1: c2,c3) of
/// accumulator tile `nt` of the warp whose keys start at `warp_key0`. The pair is two
/// neighbouring queries of one key: one 32-bit store.
FT_TC_HD constexpr ft::tc::RowCol ds_store_coord(int lane, int warp_key0, int nt, int half) {
  return ft::tc::mma_c_coord(lane, ft::tc::kPair * half) +
         ft::tc::RowCol{warp_key0, nt * ft::tc::kMmaN};
}

/// The corner, in the tile AS STORED ([key][query]), of the A fragment of dQ = dS·K for the
/// 16 queries from `query0` and the 16 keys of k-step `kk`: row = key, column = query, the
/// arguments of tc::load_a_trans(a, dSt, row0, col0).
FT_TC_HD constexpr ft::tc::RowCol ds_a_corner(int kk, int query0) {
  return {kk * ft::tc::kMmaK, query0};
}

/// Where an accumulator pair lives once tiles 2kk, 2kk+1 are packed into an A fragment
/// (tc::a_from_accumulators): pair `half` of tile nt is register `reg` of fragment kk
/// (a_i = tile[i/4].c[i%4], so i = 4·(nt%2) + 2·half). The kernel keeps Pᵀ and dSᵀ packed
/// (half the registers of the floats) and reads them back from there.
struct PackedPair {
  int kk, reg;
};
FT_TC_HD constexpr PackedPair packed_pair(int nt, int half) {
  return {nt / 2, (ft::tc::kCElems * (nt % 2) + ft::tc::kPair * half) / ft::tc::kPair};
}

/// The warp_tiles kernel (flash_backward_warp_tiles.cuh): where warp `warp`'s tile of each
/// product starts, for a block of `warps` warps, Bc keys, Br queries and head dimension d.
/// Every warp tile is kWarpTileRows = 32 rows tall. Sᵀ, dPᵀ (keys × queries) and dK, dV
/// (keys × d): Bc/32 warps down the keys, the rest across the columns; dQ (queries × d):
/// Br/32 warps down the queries, the rest across d. The CPU test checks that the tiles
/// cover each product exactly once.
constexpr int kWarpTileRows = 32;
struct WarpTileCorners {
  int key0;       ///< Sᵀ, dPᵀ, dK, dV: the warp's first key (row)
  int query0;     ///< Sᵀ, dPᵀ: its first query (column)
  int dcol0;      ///< dK, dV: its first column of d
  int dq_query0;  ///< dQ: its first query (row)
  int dq_col0;    ///< dQ: its first column of d
};
FT_TC_HD constexpr int key_col_warps(int warps, int Bc) { return warps / (Bc / kWarpTileRows); }
FT_TC_HD constexpr int dq_col_warps(int warps, int Br) { return warps / (Br / kWarpTileRows); }
FT_TC_HD constexpr WarpTileCorners warp_tile_corners(int warp, int warps, int Br, int Bc, int d) {
  const int cols = key_col_warps(warps, Bc), dq_cols = dq_col_warps(warps, Br);
  return {(warp / cols) * kWarpTileRows, (warp % cols) * (Br / cols), (warp % cols) * (d / cols),
          (warp / dq_cols) * kWarpTileRows, (warp % dq_cols) * (d / dq_cols)};
}

}  // namespace ch08
