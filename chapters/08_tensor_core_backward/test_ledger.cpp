// CPU tests of chapter 08: the ledger worked out by hand for small bf16 problems, the
// workspace, the C API's refusals, the transposed-fragment index math emulated lane by
// lane with sm80/fragment.hpp's functions (the same ones the kernel calls), and split_tail's
// plan (tail_split.hpp, the functions the launch and the kernel call). No CUDA call.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "08_tensor_core_backward/tensor_core_backward.hpp"
#include "08_tensor_core_backward/transposed_fragments.hpp"
#include "api/flashtut.h"
#include "core/limits.hpp"
#include "schedule/tail_split.hpp"
#include "sm80/fragment.hpp"
#include "sm80/swizzle.hpp"

namespace {

using ft::tc::RowCol;

ft::KernelTraffic line(const std::vector<ft::KernelTraffic>& ledger, const std::string& k) {
  for (const auto& t : ledger)
    if (t.kernel == k) return t;
  throw std::runtime_error("no ledger line " + k);
}

TEST(Ch08Ledger, SmallBf16NonCausal) {
  // B = H = 1, N = 128, d = 64, bf16: two key blocks, two query tiles, each query tile loaded
  // by both blocks (256 query rows loaded). One 2-byte tensor: 128·64·2 = 16 384 bytes.
  const auto ledger = ch08::plain_traffic(ft::make_problem(1, 1, 128, 64, false, ft::DType::BFloat16));
  ASSERT_EQ(ledger.size(), 3u);
  const ft::KernelTraffic D = line(ledger, "dot_dO_O_tc");
  EXPECT_DOUBLE_EQ(D.read_bytes, 2 * 16384.0);                  // O, dO
  EXPECT_DOUBLE_EQ(D.write_bytes, 128 * 4.0 + 128 * 64 * 4.0);  // D, the accumulator's zeros
  const ft::KernelTraffic k = line(ledger, "flash_backward_tc");
  // K, V once (32 768) + 256 rows × (Q, dO: 2·64·2 bytes; L, D: 2·4 bytes) = 256 · 264.
  EXPECT_DOUBLE_EQ(k.read_bytes, 32768.0 + 256 * 264);        // 100 352
  // dK, dV once (32 768) + dQ atomics: 256 rows × 64 floats × 4 bytes.
  EXPECT_DOUBLE_EQ(k.write_bytes, 32768.0 + 256 * 256);       // 98 304
  // DRAM: Q, K, V, dO once (65 536), L and D (1 024), the accumulator's zeros (32 768).
  EXPECT_DOUBLE_EQ(k.dram_read_bytes, 65536.0 + 1024 + 32768);
  EXPECT_DOUBLE_EQ(k.dram_write_bytes, 32768.0 + 32768);      // dK, dV; dQ in float32
  EXPECT_DOUBLE_EQ(k.flops, 10.0 * 128 * 128 * 64);           // 2.5 × the forward's 4·N²·d
  const ft::KernelTraffic c = line(ledger, "convert_dq");
  EXPECT_DOUBLE_EQ(c.read_bytes, 128 * 64 * 4.0);
  EXPECT_DOUBLE_EQ(c.write_bytes, 16384.0);
  EXPECT_DOUBLE_EQ(c.flops, 0.0);
}

TEST(Ch08Ledger, CausalRaggedTiles) {
  // N = 130, d = 64, bf16: tiles of 64, 64, 2 rows; causal, query tile i is loaded by key
  // blocks j ≤ i: 64·1 + 64·2 + 2·3 = 198 rows (chapter 05's count: the same tiles).
  const ft::Problem p = ft::make_problem(1, 1, 130, 64, true, ft::DType::BFloat16);
  const ft::KernelTraffic k = line(ch08::plain_traffic(p), "flash_backward_tc");
  EXPECT_DOUBLE_EQ(k.read_bytes, 2.0 * 130 * 64 * 2 + 198.0 * 264);  // 85 552
  EXPECT_DOUBLE_EQ(k.write_bytes, 2.0 * 130 * 64 * 2 + 198.0 * 256);  // 83 968
  EXPECT_DOUBLE_EQ(k.flops, 10.0 * 130 * 130 * 64 / 2);
  EXPECT_DOUBLE_EQ(ft::total(ch08::plain_traffic(p)).flops, k.flops + 2.0 * 130 * 64);
}

TEST(Ch08Workspace, HoldsTheFloat32DqAndD) {
  const ft::Problem p = ft::make_problem(2, 3, 1000, 64, true, ft::DType::BFloat16);
  // dQ accumulator: 6·1000·64 floats = 1 536 000 bytes; D: 6·1000 floats = 24 000 bytes.
  EXPECT_EQ(ch08::plain().workspace_bytes(p), 1536000u + 24000u);
  EXPECT_EQ(ch08::plain().dtypes,
            (std::vector<ft::DType>{ft::DType::BFloat16, ft::DType::Float16}));
}

TEST(Ch08CApi, RefusesFloat32AndOddHeadDims) {
  ft_problem p{2, 3, 3, 64, 64, 64, 0, FT_CAUSAL_TOP_LEFT, 0.f, FT_DTYPE_FLOAT32};
  EXPECT_EQ(ft_backward("ch08", p, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                             nullptr, nullptr, nullptr, 0),
            -1);
  EXPECT_NE(std::string(ft_last_error()).find("does not support dtype float32"), std::string::npos)
      << ft_last_error();
  p.dtype = FT_DTYPE_BF16;
  p.head_dim = 32;
  EXPECT_EQ(ft_backward("ch08", p, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                             nullptr, nullptr, nullptr, 0),
            -1);
  EXPECT_EQ(ft_backward_workspace_bytes("ch08", p), FT_WORKSPACE_ERROR);
  p.head_dim = 64;
  // fastest's (split_tail's) workspace: dQ's accumulator and D; no padding of D (B·H·N = 384
  // rows, a multiple of 4) and no slots (N = 64: one query tile a key tile, nothing to cut).
  EXPECT_EQ(ft_backward_workspace_bytes("ch08", p), 2u * 3 * 64 * (64 + 1) * 4);
}

// ---- The transposed products' index math, emulated lane by lane -----------------------------

/// A [key][query] tile of Bc = 64 keys × Br = 64 queries in the kernel's swizzled layout,
/// each cell holding a code of the (key, query) the warps wrote there.
constexpr int kBr = 64, kBc = 64;
using DsTile = ft::tc::SwizzledTile<kBr>;
int code(int key, int query) { return key * 1000 + query; }

std::vector<int> tile_written_by_warps() {
  std::vector<int> tile(kBc * DsTile::kRowStride, -1);
  for (int warp = 0; warp < 4; ++warp)
    for (int lane = 0; lane < 32; ++lane)
      for (int nt = 0; nt < kBr / 8; ++nt)
        for (int h = 0; h < 2; ++h) {
          // The kernel's store: accumulator elements c_{2h}, c_{2h+1} of tile nt, whose
          // (key, query) in the warp's Sᵀ are mma_c_coord(lane, 2h + j) + (16·warp, 8·nt).
          const RowCol at = ch08::ds_store_coord(lane, 16 * warp, nt, h);
          for (int j = 0; j < 2; ++j) {
            const RowCol c = ft::tc::mma_c_coord(lane, 2 * h + j) + RowCol{16 * warp, 8 * nt};
            EXPECT_EQ(c, (at + RowCol{0, j}));  // the pair is one 32-bit store
            int& cell = tile[DsTile::offset(at.row, at.col + j)];
            EXPECT_EQ(cell, -1) << "written twice";
            cell = code(c.row, c.col);
          }
        }
  return tile;
}

TEST(Ch08Fragments, DsStoresCoverTheTileOnceWithoutBankConflicts) {
  const std::vector<int> tile = tile_written_by_warps();
  for (int key = 0; key < kBc; ++key)
    for (int q = 0; q < kBr; ++q) ASSERT_EQ(tile[DsTile::offset(key, q)], code(key, q));
  // One store instruction of one warp (tile nt, half h): 32 lanes × 4 bytes, one pass.
  for (int nt = 0; nt < kBr / 8; ++nt)
    for (int h = 0; h < 2; ++h) {
      int addr[32];
      for (int lane = 0; lane < 32; ++lane) {
        const RowCol at = ch08::ds_store_coord(lane, 16, nt, h);
        addr[lane] = DsTile::offset(at.row, at.col) * ft::tc::kElemBytes;
      }
      EXPECT_EQ(ft::tc::bank_conflict_ways(addr, 32, 4), 1) << "nt " << nt << " h " << h;
    }
}

TEST(Ch08Fragments, LoadATransReadsDsFromTheTransposedTile) {
  // tc::load_a_trans(a, dSt, row0, col0) emulated: lane L hands ldmatrix the address of
  // stored row (row0, col0) + ldmatrix_src_a_trans(L); with .trans, lane l receives in
  // register q element j at (row, col) = ldmatrix_received(l, j, true) of matrix q, whose
  // row `row` is the one lane 8q + row pointed at. A's element 2q + j must then be
  // A[m][k] = dS[query m][key k] = dSᵀ[k][m], at (m, k) = mma_a_coord(l, 2q + j).
  const std::vector<int> tile = tile_written_by_warps();
  for (int kk = 0; kk < kBc / 16; ++kk)
    for (int query0 = 0; query0 < kBr; query0 += 16) {
      const RowCol corner = ch08::ds_a_corner(kk, query0);
      for (int l = 0; l < 32; ++l)
        for (int q = 0; q < ft::tc::kARegs; ++q)
          for (int j = 0; j < 2; ++j) {
            const RowCol in_matrix = ft::tc::ldmatrix_received(l, j, true);
            const int pointer_lane = 8 * q + in_matrix.row;
            const RowCol row_start = corner + ft::tc::ldmatrix_src_a_trans(pointer_lane);
            const int got = tile[DsTile::offset(row_start.row, row_start.col + in_matrix.col)];
            const RowCol mk = ft::tc::mma_a_coord(l, 2 * q + j);
            ASSERT_EQ(got, code(kk * 16 + mk.col, query0 + mk.row))
                << "kk " << kk << " query0 " << query0 << " lane " << l << " a" << 2 * q + j;
          }
      // Each of the four 8×8 matrices: 8 row reads of 16 bytes, one pass.
      for (int q = 0; q < 4; ++q) {
        int addr[8];
        for (int r = 0; r < 8; ++r) {
          const RowCol at = corner + ft::tc::ldmatrix_src_a_trans(8 * q + r);
          addr[r] = DsTile::offset(at.row, at.col) * ft::tc::kElemBytes;
        }
        EXPECT_EQ(ft::tc::bank_conflict_ways(addr, 8, 16), 1);
      }
    }
}

TEST(Ch08Fragments, TransposedScoresAreTheAOperandOfDkAndDv) {
  // Sᵀ's accumulator tiles 2kk, 2kk+1 (keys × queries 16kk..16kk+15) are, lane for lane, the
  // A fragment (m = key, k = query) of dV += Pᵀ·dO and dK += dSᵀ·Q: a_i = tile[i/4].c[i%4].
  for (int l = 0; l < 32; ++l)
    for (int i = 0; i < 8; ++i) {
      const ft::tc::CSource s = ft::tc::a_from_c(i);
      const RowCol key_query = ft::tc::mma_c_coord(l, s.index) + RowCol{0, 8 * s.tile};
      EXPECT_EQ(key_query, ft::tc::mma_a_coord(l, i)) << "lane " << l << " a" << i;
    }
}

TEST(Ch08Fragments, PackedPairIsTheAccumulatorPair) {
  // The kernel stores dSᵀ and reads P back from the packed A fragments: register reg of
  // fragment kk must hold exactly elements c_{2h}, c_{2h+1} of tile nt = 2kk + (0 or 1).
  for (int nt = 0; nt < kBr / 8; ++nt)
    for (int h = 0; h < 2; ++h) {
      const ch08::PackedPair at = ch08::packed_pair(nt, h);
      EXPECT_EQ(at.kk, nt / 2);
      for (int j = 0; j < 2; ++j) {
        const ft::tc::CSource s = ft::tc::a_from_c(2 * at.reg + j);
        EXPECT_EQ(s.tile, nt % 2) << "nt " << nt << " h " << h;
        EXPECT_EQ(s.index, 2 * h + j) << "nt " << nt << " h " << h;
      }
    }
}

// The warp_tiles kernel's map of warps to tiles (warp_tile_corners): for both of its shapes
// (Br = 128 at d = 64, 64 at d = 128; Bc = 128, 8 warps), the 8 warps' tiles of Sᵀ (32 keys ×
// Br/2 queries), of dK/dV (32 keys × d/2) and of dQ (32 queries × the rest of d) cover each
// product's every element exactly once.
TEST(Ch08Fragments, WarpTilesCoverEveryProductOnce) {
  constexpr int kWarps = 8, Bc = 128;
  for (const auto& [Br, d] : {std::pair{128, 64}, std::pair{64, 128}}) {
    SCOPED_TRACE("Br=" + std::to_string(Br) + " d=" + std::to_string(d));
    const int cols = ch08::key_col_warps(kWarps, Bc), dq_cols = ch08::dq_col_warps(kWarps, Br);
    ASSERT_EQ(cols, 2);
    ASSERT_EQ(dq_cols, kWarps * ch08::kWarpTileRows / Br);
    std::vector<int> st(Bc * Br, 0), dkv(Bc * d, 0), dq(Br * d, 0);
    for (int w = 0; w < kWarps; ++w) {
      const ch08::WarpTileCorners c = ch08::warp_tile_corners(w, kWarps, Br, Bc, d);
      for (int r = 0; r < ch08::kWarpTileRows; ++r) {
        for (int q = 0; q < Br / cols; ++q) ++st.at((c.key0 + r) * Br + c.query0 + q);
        for (int x = 0; x < d / cols; ++x) ++dkv.at((c.key0 + r) * d + c.dcol0 + x);
        for (int x = 0; x < d / dq_cols; ++x) ++dq.at((c.dq_query0 + r) * d + c.dq_col0 + x);
      }
    }
    for (const auto* v : {&st, &dkv, &dq})
      for (size_t i = 0; i < v->size(); ++i) ASSERT_EQ((*v)[i], 1) << "element " << i;
  }
}

// The variant `hoisted` (StepTraits in flash_backward_warp_tiles.cuh) computes each lane's part of the
// swizzle once (tc::HoistedLaneOffsets) and adds the fragment's place (dr, dc) at each load.
// That is only right when dr is a multiple of 8 and dc/8 shares no bit with the lane's
// chunk: here, for both shapes, every warp, lane and load of the warp_tiles kernel, the
// condition holds and the offsets equal SwizzledTile::offset (tc::LaneOffsets, which
// warp_tiles uses). Each load is listed as the kernel makes it: the warp's corner, the
// lane's place (which ldmatrix form), and the fragments' (dr, dc).
template <class Tile>
void expect_hoisted_equals_offset(RowCol corner, RowCol (*lane_place)(int), std::vector<int> drs,
                                  std::vector<int> dcs, const char* load) {
  SCOPED_TRACE(load);
  for (int lane = 0; lane < 32; ++lane) {
    const ft::tc::HoistedLaneOffsets<Tile> hoisted(corner, lane_place(lane));
    const ft::tc::LaneOffsets<Tile> plain(corner, lane_place(lane));
    for (int dr : drs)
      for (int dc : dcs) {
        ASSERT_TRUE(ft::tc::HoistedLaneOffsets<Tile>::hoistable(corner, lane_place(lane), dr, dc))
            << "lane " << lane << " dr " << dr << " dc " << dc;
        ASSERT_EQ(hoisted(dr, dc), plain(dr, dc)) << "lane " << lane << " dr " << dr << " dc " << dc;
      }
  }
}

std::vector<int> steps(int count, int step) {
  std::vector<int> v;
  for (int i = 0; i < count; ++i) v.push_back(i * step);
  return v;
}

template <int Br, int D>
void expect_every_warp_tiles_load_hoistable() {
  using Tile = ft::tc::SwizzledTile<D>;
  using PdsTile = ft::tc::SwizzledTile<Br>;
  constexpr int kWarps = 8, Bc = 128, kM = 2;
  constexpr int cols = ch08::key_col_warps(kWarps, Bc), dq_cols = ch08::dq_col_warps(kWarps, Br);
  constexpr int q_tiles = Br / cols / 8, d_tiles = D / cols / 8, dq_tiles = D / dq_cols / 8;
  const auto c_place = [](int lane) { return ft::tc::mma_c_coord(lane, 0); };
  for (int w = 0; w < kWarps; ++w) {
    SCOPED_TRACE("warp " + std::to_string(w));
    const ch08::WarpTileCorners c = ch08::warp_tile_corners(w, kWarps, Br, Bc, D);
    // Sᵀ, dPᵀ: A = K, V rows (16 keys a fragment, 16 of d a k-step); B = Q, dO rows (16 queries an x4).
    expect_hoisted_equals_offset<Tile>({c.key0, 0}, ft::tc::ldmatrix_src_a, steps(kM, 16), steps(D / 16, 16), "K, V as A");
    expect_hoisted_equals_offset<Tile>({c.query0, 0}, ft::tc::ldmatrix_src_b_x4, steps(q_tiles / 2, 16),
                                       steps(D / 16, 16), "Q, dO as B");
    // The stores of Pᵀ and dSᵀ: accumulator pairs, rows 16·m + 8·h, columns 8·n.
    expect_hoisted_equals_offset<PdsTile>({c.key0, c.query0}, c_place, steps(2 * kM, 8), steps(q_tiles, 8), "Pt, dSt stores");
    // dV, dK: A = Pᵀ, dSᵀ as stored; B = dO, Q transposed (16 of d an x4, 16 queries a k-step).
    expect_hoisted_equals_offset<PdsTile>({c.key0, 0}, ft::tc::ldmatrix_src_a, steps(kM, 16), steps(Br / 16, 16), "Pt, dSt as A");
    expect_hoisted_equals_offset<Tile>({0, c.dcol0}, ft::tc::ldmatrix_src_b_trans_x4, steps(Br / 16, 16),
                                       steps(d_tiles / 2, 16), "dO, Q as B (trans)");
    // dQ: A = dS from dSᵀ (trans; 16 keys a k-step, 16 queries a fragment); B = K (trans).
    expect_hoisted_equals_offset<PdsTile>({0, c.dq_query0}, ft::tc::ldmatrix_src_a_trans, steps(Bc / 16, 16),
                                          steps(kM, 16), "dS as A (trans)");
    expect_hoisted_equals_offset<Tile>({0, c.dq_col0}, ft::tc::ldmatrix_src_b_trans_x4, steps(Bc / 16, 16),
                                       steps(dq_tiles / 2, 16), "K as B (trans)");
  }
}

TEST(Ch08Fragments, HoistedOffsetsEqualTheSwizzleForEveryLoad) {
  expect_every_warp_tiles_load_hoistable<128, 64>();
  expect_every_warp_tiles_load_hoistable<64, 128>();
}

// And the condition matters: a fragment place whose chunk bits meet the lane's (dc = 8 for
// a lane in chunk 1) is not hoistable, and there the hoisted formula is wrong.
TEST(Ch08Fragments, HoistingNeedsDisjointChunkBits) {
  using Tile = ft::tc::SwizzledTile<64>;
  const RowCol corner{0, 0}, lane{3, 8};  // row 3, logical chunk 1
  EXPECT_FALSE(ft::tc::HoistedLaneOffsets<Tile>::hoistable(corner, lane, 0, 8));
  EXPECT_NE(ft::tc::HoistedLaneOffsets<Tile>(corner, lane)(0, 8), ft::tc::LaneOffsets<Tile>(corner, lane)(0, 8));
  EXPECT_FALSE(ft::tc::HoistedLaneOffsets<Tile>::hoistable(corner, lane, 4, 0));  // rows not by 8
  EXPECT_TRUE(ft::tc::HoistedLaneOffsets<Tile>::hoistable(corner, lane, 8, 16));
}

// ---- split_tail's plan (tail_split.hpp) ----------------------------------------------------

/// Every key tile's query tiles, as the plan's blocks cover them: [tile][query tile] counts.
std::vector<std::vector<int>> coverage(const ft::schedule::TailSplit& s, int64_t num_tiles) {
  std::vector<std::vector<int>> seen(size_t(num_tiles), std::vector<int>(size_t(s.q_tiles), 0));
  for (int64_t b = 0; b < s.blocks(); ++b) {
    if (b < s.first) {
      for (int i = 0; i < s.q_tiles; ++i) ++seen[size_t(b)][size_t(i)];
      continue;
    }
    const int64_t j = (b - s.first) / s.parts;
    const int r = int((b - s.first) % s.parts);
    EXPECT_LT(s.begin(r), s.begin(r + 1)) << "part " << r << " is empty";
    for (int i = s.begin(r); i < s.begin(r + 1); ++i) ++seen[size_t(s.first + j)][size_t(i)];
  }
  return seen;
}

// On 132 SMs: the comparison's grids (4096 key tiles at d = 64, 2048 at d = 128) cut their
// last wave's 4 or 68 tiles into the parts the variant's file comment states; whole waves,
// causal problems and one-query-tile problems are left alone.
TEST(Ch08SplitTail, PlansTheComparisonsLastWave) {
  struct Want { int64_t tiles; int q_tiles, parts; };
  for (const Want w : {Want{4096, 128, 32}, Want{4096, 32, 32}, Want{2048, 256, 13}, Want{2048, 64, 5}}) {
    const ft::schedule::TailSplit s = ft::schedule::plan_tail_split(w.tiles, w.q_tiles, 132, false, 128, 64);
    EXPECT_EQ(s.tiles, int(w.tiles % 132)) << w.tiles << " " << w.q_tiles;
    EXPECT_EQ(s.first, w.tiles - w.tiles % 132);
    EXPECT_EQ(s.parts, w.parts) << w.tiles << " " << w.q_tiles;
    EXPECT_EQ(s.slot_count(), w.tiles % 132);
  }
  EXPECT_EQ(ft::schedule::plan_tail_split(4096, 128, 132, true, 128, 64).parts, 1);   // causal
  EXPECT_EQ(ft::schedule::plan_tail_split(264, 128, 132, false, 128, 64).parts, 1);   // two whole waves
  EXPECT_EQ(ft::schedule::plan_tail_split(6, 1, 132, false, 128, 64).parts, 1);       // nothing to cut
  EXPECT_EQ(ft::schedule::plan_tail_split(4096, 128, 0, false, 128, 64).parts, 1);    // no GPU
  const ft::schedule::TailSplit none = ft::schedule::plan_tail_split(4096, 128, 132, true, 128, 64);
  EXPECT_EQ(none.blocks(), 4096);
  EXPECT_EQ(none.slot_count(), 0);
}

// The workspace's room for slots is the problem's alone: 160 tiles' worth (or every tile of a
// smaller grid), none causal or with one query tile a key tile; and a plan on a GPU whose
// last wave would hold more than 160 tiles cuts nothing.
TEST(Ch08SplitTail, WorkspaceRoomIsTheProblemsAlone) {
  EXPECT_EQ(ft::schedule::slot_capacity(4096, 128, false), ft::schedule::kMaxCutTiles);
  EXPECT_EQ(ft::schedule::slot_capacity(16, 8, false), 16);
  EXPECT_EQ(ft::schedule::slot_capacity(4096, 128, true), 0);
  EXPECT_EQ(ft::schedule::slot_capacity(4096, 1, false), 0);
  EXPECT_EQ(ft::schedule::plan_tail_split(400, 64, 200, false, 128, 64).parts, 1);  // 200 left over
  EXPECT_GT(ft::schedule::plan_tail_split(400, 64, 250, false, 128, 64).parts, 1);  // 150
  // split_tail's workspace: dq_pointer's, D padded to 4 floats, then 160 slots of
  // 2·128·64 floats (B = 1, H = 34, N = 999: 34·8 = 272 key tiles, 8 query tiles each).
  const auto impls = ch08::backward_impls();
  const auto find = [&](const char* v) {
    for (const auto& i : impls)
      if (i.variant == v) return i;
    throw std::runtime_error(v);
  };
  const ft::Problem p = ft::make_problem(1, 34, 999, 64, false, ft::DType::BFloat16);
  const size_t base = find("dq_pointer").workspace_bytes(p);
  EXPECT_EQ(base, ch08::workspace_bytes(p));
  EXPECT_EQ(find("split_tail").workspace_bytes(p), base + 2 * 4 + 160u * 2 * 128 * 64 * 4);  // 33966 rows: +2
  const ft::Problem c = ft::make_problem(1, 34, 999, 64, true, ft::DType::BFloat16);
  EXPECT_EQ(find("split_tail").workspace_bytes(c), ch08::workspace_bytes(c) + 2 * 4);  // causal: no room
}

// Whatever the grid and the GPU, every query tile of every key tile is worked on by exactly
// one block, no part is empty, and the cut tiles' rounds are no longer than the uncut wave.
TEST(Ch08SplitTail, EveryQueryTileOnceAndNoLongerTail) {
  for (int sms : {1, 7, 108, 132})
    for (int64_t tiles : {int64_t(1), int64_t(16), int64_t(131), int64_t(133), int64_t(2048)})
      for (int q_tiles : {1, 2, 8, 31, 64}) {
        const ft::schedule::TailSplit s = ft::schedule::plan_tail_split(tiles, q_tiles, sms, false, 128, 64);
        SCOPED_TRACE(std::to_string(sms) + " SMs, " + std::to_string(tiles) + " tiles of " +
                     std::to_string(q_tiles));
        for (const auto& tile : coverage(s, tiles))
          for (int n : tile) ASSERT_EQ(n, 1);
        EXPECT_LE(s.slot_count(), ft::schedule::slot_capacity(tiles, q_tiles, false));  // the workspace's room
        if (s.parts > 1) {
          const int64_t rounds = (int64_t(s.tiles) * s.parts + sms - 1) / sms;
          EXPECT_LT(rounds * ((q_tiles + s.parts - 1) / s.parts + 1), q_tiles);
          EXPECT_LE(s.parts, q_tiles);
        }
      }
}

// fastest() runs split_tail where a block may have its 161-162 KB of shared memory
// (H100, H200: 227 KB; A100: 163 KB) and async_bc64 elsewhere (the sm_86/sm_89 GPUs' 99 KB
// take its 57 and 69.5 KB).
TEST(Ch08Fastest, SplitTailWhereItsSharedMemoryFitsElseAsyncBc64) {
  for (int d : {64, 128}) {
    EXPECT_STREQ(ch08::fastest_variant(d, int(ft::kMaxSmemPerBlock)), "split_tail") << d;
    EXPECT_STREQ(ch08::fastest_variant(d, 163 * 1024), "split_tail") << d;
    EXPECT_STREQ(ch08::fastest_variant(d, 99 * 1024), "async_bc64") << d;
  }
  EXPECT_STREQ(ch08::fastest_variant(64, 165888), "split_tail");  // exactly its 162 KB
  EXPECT_STREQ(ch08::fastest_variant(64, 165887), "async_bc64");
}

}  // namespace
