// CPU tests of chapter 04's memory ledger: the formulas worked out by hand. DefaultShape
// checks the `fast` variant's ledger and reads its tile (kFastBr, kFastBc) from
// fused_forward.hpp, so it follows a change of that tile; the other tests call the formulas
// with the tile sizes they name, which no kernel constant changes.
#include <gtest/gtest.h>

#include "04_fused_forward/fused_forward.hpp"
#include "harness/traffic.hpp"

namespace {

TEST(Ch04Ledger, KeyRowsLoadedNonCausal) {
  // Every query tile loads all N keys: ceil(N/Br) · N rows.
  EXPECT_EQ(ft::kv_rows_loaded(ft::make_problem(1, 1, 4096, 64, false), 128, 32), 32.0 * 4096);
  EXPECT_EQ(ft::kv_rows_loaded(ft::make_problem(1, 1, 1000, 64, false), 128, 64), 8.0 * 1000);
  EXPECT_EQ(ft::kv_rows_loaded(ft::make_problem(1, 1, 1, 64, false), 128, 64), 1.0);
}

TEST(Ch04Ledger, KeyRowsLoadedCausal) {
  // Query tile t loads keys up to its last row, (t+1)·Br − 1, in whole Bc tiles, capped at N.
  EXPECT_EQ(ft::kv_rows_loaded(ft::make_problem(1, 1, 17, 64, true), 128, 64), 17.0);
  EXPECT_EQ(ft::kv_rows_loaded(ft::make_problem(1, 1, 256, 64, true), 128, 64), 128.0 + 256);
  // N = 1000, Br = 128: tiles 0..6 load 128, 256, …, 896 keys; tile 7 loads all 1000.
  EXPECT_EQ(ft::kv_rows_loaded(ft::make_problem(1, 1, 1000, 64, true), 128, 32), 128.0 * 28 + 1000);
  // Br = 64, Bc = 128: a 64-row query tile still loads a whole 128-key tile.
  EXPECT_EQ(ft::kv_rows_loaded(ft::make_problem(1, 1, 256, 64, true), 64, 128), 128.0 + 128 + 256 + 256);
}

TEST(Ch04Ledger, DefaultShape) {
  // The `fast` variant's own ledger at B=4, H=32, N=4096, d=64, with its tile (kFastBr ×
  // kFastBc, fused_forward.hpp), so that this test follows a change of that tile. A head's Q
  // is 4096·64·4 B = 1 MiB; every query tile loads all 4096 keys (non-causal), whatever Bc.
  const auto p = ft::make_problem(4, 32, 4096, 64, false);
  const auto ledger = ch04::fast().traffic(p);
  ASSERT_EQ(ledger.size(), 1u);
  const ft::KernelTraffic& t = ledger[0];
  const double mib = 1024.0 * 1024.0, heads = 128;
  const double query_tiles = ft::ceil_div(4096, ch04::kFastBr);  // 32 at Br = 128
  EXPECT_EQ(t.kernel, "fused_forward_kernel");
  EXPECT_DOUBLE_EQ(t.read_bytes, heads * (1 + 2 * query_tiles) * mib);  // Q once, K and V 32 times
  EXPECT_DOUBLE_EQ(t.write_bytes, heads * (mib + 4096 * 4));          // O and lse once
  EXPECT_DOUBLE_EQ(t.dram_read_bytes, heads * 3 * mib);               // K/V re-reads hit L2
  EXPECT_DOUBLE_EQ(t.dram_write_bytes, t.write_bytes);
  EXPECT_DOUBLE_EQ(t.flops, 4.0 * heads * 4096.0 * 4096.0 * 64);
  EXPECT_FALSE(t.note.empty());
}

TEST(Ch04Ledger, CausalHalvesFlopsNotQOrO) {
  const auto full = ft::fused_forward_traffic(ft::make_problem(2, 3, 2048, 128, false), "k", 128, 32);
  const auto causal = ft::fused_forward_traffic(ft::make_problem(2, 3, 2048, 128, true), "k", 128, 32);
  EXPECT_DOUBLE_EQ(causal.flops, full.flops / 2);
  EXPECT_DOUBLE_EQ(causal.write_bytes, full.write_bytes);
  EXPECT_DOUBLE_EQ(causal.dram_read_bytes, full.dram_read_bytes);
  // K/V requested: 16 tiles · 2048 rows vs 128·(1 + … + 16) rows.
  const double head_q = 2048.0 * 128 * 4, row = 128.0 * 4, heads = 6;
  EXPECT_DOUBLE_EQ(full.read_bytes, heads * (head_q + 2 * 16 * 2048 * row));
  EXPECT_DOUBLE_EQ(causal.read_bytes, heads * (head_q + 2 * 128 * 136 * row));
}

TEST(Ch04Ledger, KVBeyondL2GoesToDram) {
  // One head's K+V at N = 65536, d = 128 is 64 MiB: more than the model's 30 MiB L2 share.
  const auto t = ft::fused_forward_traffic(ft::make_problem(1, 1, 65536, 128, false), "k", 128, 32);
  EXPECT_DOUBLE_EQ(t.dram_read_bytes, t.read_bytes);
}

}  // namespace
