// CPU tests of chapter 06's bookkeeping: the ledger's byte counts worked out by hand for
// small bf16 problems (2-byte elements, float32 lse; S in 4 or 2 bytes), the grid's row
// padding, the softmax instances by row length, warp_rows' ledger against grid_half's, the
// workspace, what the variants list, and the C API's refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "06_tensor_cores/tensor_cores.hpp"
#include "api/flashtut.h"

namespace {

using ch06::ScoreStorage;

TEST(Ch06Grid, RowsPaddedToSixteenBytes) {
  EXPECT_EQ(ch06::grid_row_stride(1), 8);
  EXPECT_EQ(ch06::grid_row_stride(17), 24);
  EXPECT_EQ(ch06::grid_row_stride(64), 64);
  EXPECT_EQ(ch06::grid_row_stride(1000), 1000);
  // Causal rows of P are written to the end of their 128-row query tile's key tiles.
  EXPECT_EQ(ch06::p_columns_written(300, true, 0), 128);
  EXPECT_EQ(ch06::p_columns_written(300, true, 127), 128);
  EXPECT_EQ(ch06::p_columns_written(300, true, 128), 256);
  EXPECT_EQ(ch06::p_columns_written(300, true, 299), 304);  // capped at ld
  EXPECT_EQ(ch06::p_columns_written(300, false, 0), 304);
  // One sweep in registers up to 256 threads × 64 scores.
  EXPECT_TRUE(ch06::softmax_row_in_registers(16384));
  EXPECT_FALSE(ch06::softmax_row_in_registers(16392));
  EXPECT_EQ(ch06::softmax_regs(4096), 16);
  EXPECT_EQ(ch06::softmax_regs(4104), 32);
  EXPECT_EQ(ch06::softmax_regs(16384), 64);
  // warp_rows: a warp's 32 lanes hold 8, 16, 32 or 64 scores each, rows up to 2048.
  EXPECT_EQ(ch06::warp_softmax_regs(8), 8);
  EXPECT_EQ(ch06::warp_softmax_regs(256), 8);
  EXPECT_EQ(ch06::warp_softmax_regs(264), 16);
  EXPECT_EQ(ch06::warp_softmax_regs(1000), 32);
  EXPECT_EQ(ch06::warp_softmax_regs(1024), 32);
  EXPECT_EQ(ch06::warp_softmax_regs(1032), 64);
  EXPECT_EQ(ch06::warp_softmax_regs(2048), 64);
  EXPECT_TRUE(ch06::warp_softmax_fits(2048));
  EXPECT_FALSE(ch06::warp_softmax_fits(2056));
  EXPECT_EQ(ch06::kWarpSoftmaxThreads, 8 * 32);
}

TEST(Ch06Ledger, TinyProblemByHand) {
  // 2 heads, N = 20 (ld = 24), d = 64, bf16: a row of Q/K/V/O is 128 B; one tile covers all.
  const auto p = ft::make_problem(1, 2, 20, 64, false, ft::DType::BFloat16);
  for (ScoreStorage s : {ScoreStorage::Float32, ScoreStorage::Half}) {
    SCOPED_TRACE(s == ScoreStorage::Float32 ? "grid_f32" : "grid_half");
    const double es = s == ScoreStorage::Float32 ? 4 : 2;
    const auto k = ch06::traffic(p, s);
    ASSERT_EQ(k.size(), 3u);
    EXPECT_EQ(k[0].kernel, "qk_scores_tc");
    EXPECT_DOUBLE_EQ(k[0].read_bytes, 2 * (20 + 20) * 128.0);  // Q and K tile, 20 rows each
    EXPECT_DOUBLE_EQ(k[0].dram_read_bytes, k[0].read_bytes);
    EXPECT_DOUBLE_EQ(k[0].write_bytes, 2 * 20 * 24 * es);      // S, padded rows
    EXPECT_DOUBLE_EQ(k[0].flops, 2 * 2.0 * 20 * 20 * 64);
    EXPECT_EQ(k[1].kernel, "row_softmax_tc");
    // S read in 16-byte pieces holding visible scores: 20 of 24 columns in float32 (5
    // pieces of 4), all 24 in bf16 (3 pieces of 8).
    EXPECT_DOUBLE_EQ(k[1].read_bytes, 2 * 20 * (es == 4 ? 20 : 24) * es);
    EXPECT_DOUBLE_EQ(k[1].dram_read_bytes, k[1].read_bytes);
    EXPECT_DOUBLE_EQ(k[1].write_bytes, 2 * (20 * 24 * 2.0 + 20 * 4));  // P (bf16), lse (float)
    EXPECT_DOUBLE_EQ(k[1].flops, 0);
    EXPECT_EQ(k[2].kernel, "pv_output_tc");
    EXPECT_DOUBLE_EQ(k[2].read_bytes, 2 * (20 * 24 * 2.0 + 20 * 128));  // P chunks, V rows
    EXPECT_DOUBLE_EQ(k[2].dram_read_bytes, k[2].read_bytes);
    EXPECT_DOUBLE_EQ(k[2].write_bytes, 2 * 20 * 128.0);  // O
    EXPECT_DOUBLE_EQ(ft::total(k).flops, p.forward_flops());
    EXPECT_EQ(ch06::workspace_bytes(p, s), size_t(2 * 20 * 24 * es));
  }
}

TEST(Ch06Ledger, CausalTilesByHand) {
  // 1 head, N = 300 (ld = 304), d = 128, bf16, causal: 3 tiles of 128, 128, 44 rows; a row
  // of Q/K/V/O is 256 B. Score tiles (0,0) (1,0) (1,1) (2,0) (2,1) (2,2).
  const auto p = ft::make_problem(1, 1, 300, 128, true, ft::DType::BFloat16);
  // The grid's tiles on or below the diagonal, rows < N, columns < ld:
  // 128·128 + 128·256 + 44·304 = 62528 elements; the softmax writes exactly these columns of
  // P (each query tile's rows up to its tile's end), and O = P·V reads exactly them.
  const double visited = 128 * 128 + 128 * 256 + 44 * 304;
  for (ScoreStorage s : {ScoreStorage::Float32, ScoreStorage::Half}) {
    const double es = s == ScoreStorage::Float32 ? 4 : 2;
    const auto k = ch06::traffic(p, s);
    // Q tile rows: 128·1 + 128·2 + 44·3; K tile rows: 128·3 + 128·2 + 44·1.
    EXPECT_DOUBLE_EQ(k[0].read_bytes, (516 + 684) * 256.0);
    EXPECT_DOUBLE_EQ(k[0].dram_read_bytes, 2 * 300 * 256.0);
    EXPECT_DOUBLE_EQ(k[0].write_bytes, visited * es);
    // Softmax reads: Σ over rows of the visible scores rounded up to whole 16-byte pieces:
    // Σ_{v=1..300} ⌈v/4⌉·4 = 45600 (float32), Σ ⌈v/8⌉·8 = 46208 (bf16).
    EXPECT_DOUBLE_EQ(k[1].read_bytes, (es == 4 ? 45600 : 46208) * es);
    EXPECT_DOUBLE_EQ(k[1].write_bytes, visited * 2 + 300 * 4);
    // O = P·V: V rows 128 + 256 + 300 (the last tile's 5 key tiles stop at N).
    EXPECT_DOUBLE_EQ(k[2].read_bytes, visited * 2 + (128 + 256 + 300) * 256.0);
    EXPECT_DOUBLE_EQ(k[2].dram_read_bytes, visited * 2 + 300 * 256.0);  // V once
    EXPECT_DOUBLE_EQ(k[2].write_bytes, 300 * 256.0);
    EXPECT_DOUBLE_EQ(k[0].flops, 2.0 * 300 * 300 * 128 / 2);  // halved causal
    EXPECT_DOUBLE_EQ(k[2].flops, k[0].flops);
  }
}

TEST(Ch06Ledger, TheGridIsTheTraffic) {
  // N = 16384, d = 128, B = 1, H = 16 in bf16: per score, grid_f32 moves 4 + 4 + 2 + 2 bytes
  // (S written, S read, P written, P read), grid_half 2 + 2 + 2 + 2.
  const auto p = ft::make_problem(1, 16, 16384, 128, false, ft::DType::BFloat16);
  const double scores = 16.0 * 16384 * 16384, tensor = 16.0 * 16384 * 128 * 2, lse = 16.0 * 16384 * 4;
  const auto f32 = ft::total(ch06::traffic(p, ScoreStorage::Float32));
  const auto half = ft::total(ch06::traffic(p, ScoreStorage::Half));
  EXPECT_DOUBLE_EQ(f32.dram_bytes(), 12 * scores + 4 * tensor + lse);  // Q, K, V read; O written
  EXPECT_DOUBLE_EQ(half.dram_bytes(), 8 * scores + 4 * tensor + lse);
  EXPECT_DOUBLE_EQ(f32.flops, 4.0 * 16 * 16384 * 16384 * 128);
}

TEST(Ch06Ledger, LongRowsAreReadTwice) {
  // N = 32768 > 256 · 64: the softmax reads each row twice.
  const auto p = ft::make_problem(1, 1, 32768, 64, false, ft::DType::BFloat16);
  const auto k = ch06::traffic(p, ScoreStorage::Half)[1];
  const double row_reads = 32768.0 * 32768 * 2;
  EXPECT_DOUBLE_EQ(k.read_bytes, 2 * row_reads);
  EXPECT_TRUE(k.dram_read_bytes == row_reads || k.dram_read_bytes == 2 * row_reads);
}

TEST(Ch06Ledger, WarpRowsMovesGridHalfsBytes) {
  // warp_rows reads and writes the softmax's pieces exactly as grid_half does, at every
  // shape (ragged, causal, past the warp's 2048 columns, past the block's registers); only
  // the kernel's name differs, and only where the row fits a warp.
  const auto& impls = ch06::forward_impls();
  const auto half = std::find_if(impls.begin(), impls.end(), [](const auto& i) { return i.variant == "grid_half"; });
  const auto warp = std::find_if(impls.begin(), impls.end(), [](const auto& i) { return i.variant == "warp_rows"; });
  ASSERT_NE(half, impls.end());
  ASSERT_NE(warp, impls.end());
  for (int N : {1, 17, 300, 1000, 1024, 2048, 2049, 4096, 32768})
    for (int d : {64, 128})
      for (bool causal : {false, true}) {
        const auto p = ft::make_problem(2, 3, N, d, causal, ft::DType::BFloat16);
        SCOPED_TRACE(p.describe());
        const auto a = half->traffic(p), b = warp->traffic(p);
        ASSERT_EQ(a.size(), 3u);
        ASSERT_EQ(b.size(), 3u);
        for (size_t k = 0; k < 3; ++k) {
          EXPECT_DOUBLE_EQ(b[k].read_bytes, a[k].read_bytes) << b[k].kernel;
          EXPECT_DOUBLE_EQ(b[k].write_bytes, a[k].write_bytes) << b[k].kernel;
          EXPECT_DOUBLE_EQ(b[k].dram_read_bytes, a[k].dram_read_bytes) << b[k].kernel;
          EXPECT_DOUBLE_EQ(b[k].dram_write_bytes, a[k].dram_write_bytes) << b[k].kernel;
          EXPECT_DOUBLE_EQ(b[k].flops, a[k].flops) << b[k].kernel;
          if (k != 1) {
            EXPECT_EQ(b[k].kernel, a[k].kernel);
          }
        }
        EXPECT_EQ(b[1].kernel, N <= 2048 ? "warp_softmax_tc" : "row_softmax_tc");
        EXPECT_EQ(warp->workspace_bytes(p), half->workspace_bytes(p));
      }
}

TEST(Ch06Scores, StagingTileCoveredOnceWithoutBankConflicts) {
  // qk_scores_tc's epilogue, emulated: 8 warps in a 4 × 2 grid of 32×64 pieces, 2 × 8
  // accumulator tiles each (as qk_scores.cuh), write their pairs into ScoreStage; then
  // chunk q = it·256 + thread goes from ScoreStage to the grid. Both in bf16 and float32.
  using ft::tc::RowCol;
  for (int bytes : {2, 4}) {
    SCOPED_TRACE(bytes == 2 ? "bf16 S" : "float32 S");
    const int elems = ch06::score_stage_bytes(bytes) / bytes;
    std::vector<int> written(elems, 0);
    for (int warp = 0; warp < 8; ++warp)
      for (int mt = 0; mt < 2; ++mt)
        for (int h = 0; h < 2; ++h)
          for (int nt = 0; nt < 8; ++nt) {
            int addr[ft::tc::kLanes];  // one store instruction of the warp
            for (int lane = 0; lane < ft::tc::kLanes; ++lane) {
              const RowCol rc = RowCol{warp / 2 * 32 + mt * 16, warp % 2 * 64 + nt * 8} +
                                ft::tc::mma_c_coord(lane, 2 * h);  // c[2h], c[2h+1]
              const int at = ch06::ScoreStage::offset(rc.row, rc.col);
              ASSERT_LT(at + 1, elems);
              ++written[at], ++written[at + 1];
              addr[lane] = at * bytes;
            }
            // A 4-byte store is served for the whole warp at once, an 8-byte one by halves.
            const int lanes = 128 / (2 * bytes);
            for (int l0 = 0; l0 < ft::tc::kLanes; l0 += lanes)
              EXPECT_EQ(ft::tc::bank_conflict_ways(addr + l0, lanes, 2 * bytes), 1)
                  << "warp " << warp << " mt " << mt << " h " << h << " nt " << nt;
          }
    for (int r = 0; r < ch06::kScoreTile; ++r)
      for (int c = 0; c < ch06::ScoreStage::kRowStride; ++c)
        ASSERT_EQ(written[ch06::ScoreStage::offset(r, c)], c < ch06::kScoreTile ? 1 : 0)
            << "row " << r << " col " << c;

    // The copy to the grid: every chunk of the tile once, 16-byte aligned, 8 lanes (one
    // 128-byte pass of LDS.128) in one row and conflict-free, a warp 512 bytes of whole rows.
    const int per_chunk = ch06::score_chunk_elems(bytes);
    const int chunks = ch06::kScoreTile * ch06::kScoreTile / per_chunk;
    ASSERT_EQ(chunks % 256, 0);
    std::vector<int> read(elems, 0);
    for (int q0 = 0; q0 < chunks; q0 += ft::tc::kBlock) {
      int addr[ft::tc::kBlock];
      for (int i = 0; i < ft::tc::kBlock; ++i) {
        const RowCol rc = ch06::score_chunk(bytes, q0 + i);
        ASSERT_EQ(rc.col % per_chunk, 0);
        EXPECT_EQ(rc, (RowCol{q0 * per_chunk / ch06::kScoreTile, (q0 + i) * per_chunk % ch06::kScoreTile}));
        const int at = ch06::ScoreStage::offset(rc.row, rc.col);
        ASSERT_EQ(at * bytes % 16, 0);
        for (int e = 0; e < per_chunk; ++e) ++read[at + e];
        addr[i] = at * bytes;
      }
      EXPECT_EQ(ft::tc::bank_conflict_ways(addr, ft::tc::kBlock, 16), 1) << "chunk " << q0;
    }
    EXPECT_EQ(read, written);  // exactly the elements the fragments wrote
  }
  EXPECT_EQ(ch06::score_stage_bytes(2), 128 * 136 * 2);  // 34 KB: more than d = 64's Q + K
  EXPECT_EQ(ch06::score_stage_bytes(4), 128 * 136 * 4);  // 68 KB
  // The grid row stride is a multiple of 8 scores, so a 16-byte chunk never straddles ld.
  for (int N : {1, 17, 1000, 16384}) EXPECT_EQ(ch06::grid_row_stride(N) % ch06::score_chunk_elems(2), 0);
}

TEST(Ch06Impls, ListWhatTheyCompile) {
  const auto impls = ch06::forward_impls();
  ASSERT_EQ(impls.size(), 3u);
  EXPECT_EQ(impls[0].variant, "grid_f32");
  EXPECT_EQ(impls[1].variant, "grid_half");
  EXPECT_EQ(impls[2].variant, "warp_rows");
  EXPECT_EQ(ch06::warp_rows().variant, "warp_rows");
  EXPECT_EQ(ch06::fastest().variant, "warp_rows");
  const auto p = ft::make_problem(2, 3, 100, 64, false, ft::DType::BFloat16);  // ld = 104
  for (const auto& impl : impls) {
    EXPECT_EQ(impl.chapter, "06");
    EXPECT_EQ(impl.dtypes, (std::vector<ft::DType>{ft::DType::BFloat16, ft::DType::Float16}))
        << impl.variant;
    EXPECT_EQ(impl.head_dims, (std::vector<int>{64, 128})) << impl.variant;
    EXPECT_EQ(impl.min_sm, 80) << impl.variant;
  }
  EXPECT_EQ(impls[0].workspace_bytes(p), size_t(600 * 104 * 4));
  EXPECT_EQ(impls[1].workspace_bytes(p), size_t(600 * 104 * 2));
  EXPECT_EQ(impls[2].workspace_bytes(p), size_t(600 * 104 * 2));  // grid_half's grid
}

TEST(Ch06CApi, RefusesFloat32AndOddHeadDims) {
  ft_problem p{2, 3, 3, 64, 64, 64, 0, FT_CAUSAL_TOP_LEFT, 0.f, FT_DTYPE_FLOAT32};
  EXPECT_EQ(ft_forward("ch06", p, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0), -1);
  EXPECT_NE(std::string(ft_last_error()).find("float32"), std::string::npos) << ft_last_error();
  p.dtype = FT_DTYPE_BF16;
  p.head_dim = 32;
  EXPECT_EQ(ft_forward("ch06", p, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0), -1);
  EXPECT_EQ(ft_forward_workspace_bytes("ch06", p), FT_WORKSPACE_ERROR);
  p.head_dim = 128;
  EXPECT_EQ(ft_forward_workspace_bytes("ch06", p), size_t(6 * 64 * 64 * 2));  // grid_half's grid
}

}  // namespace
