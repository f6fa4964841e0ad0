/// @file flash_backward_hoisted.cuh
/// @brief Variant `hoisted`: warp_tiles with each lane's part of the swizzle computed once,
/// so that a fragment load costs one XOR with a constant instead of a fresh Tile::offset.
///
/// What changed from `warp_tiles`, and why. The kernel is the same (flash_backward_warp_tiles
/// .cuh); only the type that says where a lane's element of a fragment is differs. warp_tiles
/// asks SwizzledTile::offset(corner + lane + (dr, dc)) at every load, and since the warp's
/// corner is known only at run time, little of it folds: a row product, a division, a modulo
/// and the XOR, again for each of the 144 ldmatrix and 32 (d = 128) or 64 (d = 64) stores of
/// a query tile, with too few registers left (the accumulators take 192 of 255) to keep the
/// results. Before this
/// step Nsight Compute counted 1.59e9 executed instructions for warp_tiles at B = 4, H = 16,
/// N = 4096, d = 128 against 1.07e9 for FlashAttention-2's backward (the same tile shape and
/// the same 144 ldmatrix and 320 mma a tile), and put 2.0 of the 6.5 cycles between a warp's
/// instructions on waiting for fixed-latency (integer) results: with 8 warps an SM, the
/// integer chains that feed each ldmatrix are latency the other warps cannot hide.
///
/// tc::HoistedLaneOffsets splits the swizzle. For a lane at row r, column c of a fragment
/// whose place in the warp tile is (dr, dc), with dr a multiple of 8 and dc/8 sharing no bit
/// with c/8 (true of every load here: the warps' corners and the fragments' places are
/// powers of two apart; the CPU test checks every one), the stored offset is
///     [r·COLS + c % 8] + dr·COLS + ([c/8 XOR r % 8] XOR dc/8)·8:
/// two numbers per kind of load computed before the loop, then per load one LOP3 with a
/// constant and an immediate in the ldmatrix. The products, the barriers, the bytes: as
/// warp_tiles. The main loop at d = 128 (cuobjdump -sass, static count): 1665 instructions
/// for warp_tiles (after this step's fixes to the kernel they share), 1452 for hoisted;
/// executed, 1.10e9 at the shape above, level with FlashAttention-2's 1.07e9.
///
/// Run: ./build/chapters/08_tensor_core_backward/ch08_tensor_core_backward --variant hoisted
#pragma once

#include "08_tensor_core_backward/flash_backward_warp_tiles.cuh"

namespace ch08 {

/// warp_tiles' tiles and warps, with the lane's swizzle hoisted out of the loads.
template <class Element, int D_>
struct HoistedTraits : WarpTileTraits<Element, D_> {
  template <class Layout>
  using Lane = ft::tc::HoistedLaneOffsets<Layout>;
  /// The registers the addresses no longer take keep the rounded P in registers at d = 64
  /// too (ptxas -v: 255 registers, no spill), where warp_tiles re-reads it from Pt: 32
  /// shared-memory loads a tile fewer, in a kernel whose second-largest stall is the MIO
  /// queue (shared-memory instructions). Measured in the same run with the re-read kept
  /// (ch08_hoisted_reread.csv, this chapter's README): 7% faster at d = 64, N = 16384.
  static constexpr bool kRereadP = false;
};

}  // namespace ch08
