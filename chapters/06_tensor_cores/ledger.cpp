// Chapter 06's memory ledger and workspace, as plain host code (no CUDA needed), so that
// the CPU tests check the formulas by hand. Every count follows what the kernels do with
// the constants of tensor_cores.hpp: which tiles exist, which rows and 16-byte chunks they
// copy, which columns of the grid they store.
#include <algorithm>
#include <string>

#include "06_tensor_cores/tensor_cores.hpp"

namespace ch06 {
namespace {

/// Bytes of one score in the grid.
double score_bytes(const ft::Problem& p, ScoreStorage storage) {
  return storage == ScoreStorage::Float32 ? 4.0 : double(ft::dtype_bytes(p.dtype));
}

/// Rows of tile t when N rows are cut into tiles of `tile`: the last tile may be partial.
double tile_rows(int N, int tile, int t) { return double(std::min(tile, N - t * tile)); }

using ft::ceil_div;

const char* storage_name(ScoreStorage storage) {
  return storage == ScoreStorage::Float32 ? "float32" : "the dtype";
}

/// qk_scores_tc. Per head: a tile (qt, kt) copies the rows of Q tile qt and of K tile kt
/// that lie below N and stores rows < N, columns < ld of its 128×128 piece of S.
ft::KernelTraffic scores_line(const ft::Problem& p, ScoreStorage storage) {
  const int N = p.len_q, tiles = ceil_div(N, kScoreTile);
  const double ld = grid_row_stride(N), row = double(p.head_dim) * ft::dtype_bytes(p.dtype);
  double q_rows = 0, k_rows = 0, s_elems = 0;  // one head's
  for (int t = 0; t < tiles; ++t) {
    const int visited = p.causal ? t + 1 : tiles;  // tiles in row t: kt ≤ t when causal
    q_rows += tile_rows(N, kScoreTile, t) * visited;
    k_rows += tile_rows(N, kScoreTile, t) * (p.causal ? tiles - t : tiles);  // K tile t's readers
    s_elems += tile_rows(N, kScoreTile, t) * std::min(ld, double(kScoreTile) * visited);
  }
  const double BH = double(p.heads_total());
  ft::KernelTraffic k;
  k.kernel = "qk_scores_tc";
  k.read_bytes = BH * (q_rows + k_rows) * row;
  k.write_bytes = BH * s_elems * score_bytes(p, storage);
  // The blocks of one row of tiles share their Q tile and sweep one head's K: while that K
  // (N·d elements) fits the L2 share, each of Q and K crosses DRAM once.
  const bool fits = ft::fits_l2(double(N) * row);
  k.dram_read_bytes = fits ? BH * 2 * double(N) * row : k.read_bytes;
  k.dram_write_bytes = k.write_bytes;
  k.flops = p.forward_flops() / 2;  // 2·N²·d per head, halved causal, as the papers count
  k.note = std::string("S in ") + storage_name(storage) + " written once" +
           (fits ? "; Q, K re-reads hit L2, each crosses DRAM once" : "; a head's K overflows L2");
  return k;
}

/// row_softmax_tc. Row i reads the 16-byte pieces that hold its visible scores, writes
/// p_columns_written(i) elements of P and one float of lse. warp_softmax_tc (a warp per row,
/// for rows that fit: warp_softmax_fits) reads and writes exactly the same pieces, once.
ft::KernelTraffic softmax_line(const ft::Problem& p, ScoreStorage storage, SoftmaxKernel softmax) {
  const int N = p.len_q, ld = grid_row_stride(N);
  const double es = score_bytes(p, storage);
  const int vec = int(16 / es);  // scores per 16-byte load
  double read = 0, written = 0;  // elements, one head's
  for (int i = 0; i < N; ++i) {
    const int visible = p.causal ? i + 1 : N;
    read += std::min(ld, ceil_div(visible, vec) * vec);
    written += p_columns_written(N, p.causal, i);
  }
  const double BH = double(p.heads_total());
  const bool in_registers = softmax_row_in_registers(ld);
  // Rows longer than the registers are read twice; the second read finds the row in L2
  // while the rows in flight (two blocks an SM) fit the L2 share.
  const double in_flight = ft::gpu_facts().sms * kSoftmaxMinBlocks * ld * es;
  const bool reread_hits = ft::fits_l2(in_flight);
  ft::KernelTraffic k;
  k.kernel = "row_softmax_tc";
  k.read_bytes = BH * read * es * (in_registers ? 1 : 2);
  k.write_bytes = BH * (written * ft::dtype_bytes(p.dtype) + double(N) * 4);  // P, lse float32
  k.dram_read_bytes = in_registers || reread_hits ? BH * read * es : k.read_bytes;
  k.dram_write_bytes = k.write_bytes;
  k.flops = 0;  // the papers count only the matrix products
  k.note = in_registers ? "the row read once into registers, P written over S in the dtype"
                        : std::string("rows past the registers: two reads, ") +
                              (reread_hits ? "the second from L2" : "both from DRAM");
  if (softmax == SoftmaxKernel::WarpPerRow && warp_softmax_fits(ld)) {  // in_registers too
    k.kernel = "warp_softmax_tc";
    k.note = "a warp per row: the row read once into a warp's registers, P written over S";
  }
  return k;
}

/// pv_output_tc. Query tile qt copies, for each key tile up to its last visible key, the
/// chunks of P below N and the rows of V below N; writes its rows of O.
ft::KernelTraffic pv_line(const ft::Problem& p) {
  const int N = p.len_q, q_tiles = ceil_div(N, kPvRows);
  const double ld = grid_row_stride(N), E = ft::dtype_bytes(p.dtype), row = p.head_dim * E;
  double p_elems = 0, v_rows = 0;  // one head's
  for (int t = 0; t < q_tiles; ++t) {
    const int kv_end = p.causal ? std::min(N, (t + 1) * kPvRows) : N;
    const double keys = double(ceil_div(kv_end, kPvKeys)) * kPvKeys;  // whole key tiles
    p_elems += tile_rows(N, kPvRows, t) * std::min(ld, keys);
    v_rows += std::min(double(N), keys);
  }
  const double BH = double(p.heads_total());
  const bool fits = ft::fits_l2(double(N) * row);  // one head's V, re-read by every query tile
  ft::KernelTraffic k;
  k.kernel = "pv_output_tc";
  k.read_bytes = BH * (p_elems * E + v_rows * row);
  k.write_bytes = BH * double(N) * row;  // O
  k.dram_read_bytes = fits ? BH * (p_elems * E + double(N) * row) : k.read_bytes;
  k.dram_write_bytes = k.write_bytes;
  k.flops = p.forward_flops() / 2;
  k.note = fits ? "P read once; V re-read per query tile from L2" : "a head's V overflows L2";
  return k;
}

}  // namespace

size_t workspace_bytes(const ft::Problem& p, ScoreStorage storage) {
  return size_t(p.rows()) * size_t(grid_row_stride(p.len_q)) * size_t(score_bytes(p, storage));
}

std::vector<ft::KernelTraffic> traffic(const ft::Problem& p, ScoreStorage storage,
                                       SoftmaxKernel softmax) {
  return {scores_line(p, storage), softmax_line(p, storage, softmax), pv_line(p)};
}

}  // namespace ch06
