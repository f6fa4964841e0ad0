/// @file tensor_cores.hpp
/// @brief Chapter 06: chapter 02's three kernels on the tensor cores, in bf16 and fp16 with
/// float32 accumulation. S = scale·Q·Kᵀ and O = P·V become mma.sync products; the N×N grid
/// still goes through device memory, with chapter 03's online softmax between the products.
///
/// The constants here are the ones the kernels and the ledger (ledger.cpp) share, so that
/// the bytes the ledger counts are the bytes the kernels move.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "harness/harness.hpp"
#include "core/problem.hpp"
#include "sm80/swizzle.hpp"
#include "harness/traffic.hpp"

// The helpers below are used by the kernels and by the host ledger alike.
#if defined(__CUDACC__)
#define CH06_HD __host__ __device__
#else
#define CH06_HD
#endif

namespace ch06 {

/// How the scores S are stored in the grid between the first product and the softmax.
/// P is always stored in the problem's dtype (it is the A operand of O = P·V).
enum class ScoreStorage {
  Float32,  ///< S as the float32 accumulators left it: 4 bytes an element, exact to 24 bits
  Half,     ///< S rounded to the problem's dtype (bf16 or fp16): 2 bytes, 8 or 11 bits
};

/// S = scale·Q·Kᵀ: a block computes one kScoreTile × kScoreTile tile of S. 128 is the
/// largest square tile whose Q and K tiles (2 · 128 · d bf16 = 64 KB at d = 128) still let
/// two blocks share an SM's shared memory, and each K row fetched serves 128 queries.
constexpr int kScoreTile = 128;

/// qk_scores_tc's epilogue (qk_scores.cuh) stages its finished tile of S in shared memory
/// before storing it: kScoreTile rows of kScoreTile scores, each row padded by 8 scores
/// (PaddedTile's index math, counted in elements of the score type: 16 bytes of padding in
/// bf16/fp16, 32 in float32), so that row r starts r (bf16) or 2r (float32) 16-byte bank
/// groups further on and the accumulators' 8 rows a store go to 8 different groups.
using ScoreStage = ft::tc::PaddedTile<kScoreTile>;
CH06_HD constexpr int score_stage_bytes(int score_bytes) {
  return kScoreTile * ScoreStage::kRowStride * score_bytes;
}
/// Scores in one 16-byte chunk: 8 in bf16/fp16, 4 in float32.
CH06_HD constexpr int score_chunk_elems(int score_bytes) { return ft::tc::kChunkBytes / score_bytes; }
/// Chunk q of the staged tile, numbered row by row: its row and first column. Consecutive
/// threads take consecutive chunks, so a warp stores whole rows of the tile (2 of 256 bytes
/// in bf16/fp16, 1 of 512 bytes in float32). ld is a multiple of 8, so a chunk is either
/// wholly before the end of the grid's row or wholly past it.
CH06_HD constexpr ft::tc::RowCol score_chunk(int score_bytes, int q) {
  const int per_row = kScoreTile / score_chunk_elems(score_bytes);
  return {q / per_row, q % per_row * score_chunk_elems(score_bytes)};
}

/// O = P·V: a block owns kPvRows query rows (8 warps of 16 rows) and walks the keys in
/// tiles of kPvKeys. 64 keys of bf16 are one 128-byte row of a P tile: one swizzle period.
constexpr int kPvRows = 128;
constexpr int kPvKeys = 64;

/// The softmax: one block of 256 threads per row of the grid (chapter 02's choice: 8 warps).
constexpr int kSoftmaxThreads = 256;
/// Scores a softmax thread keeps in registers, at most: rows of up to 256 · 64 = 16384
/// elements are read once and written from registers (chapter 03's register kernel);
/// longer rows are read twice.
constexpr int kSoftmaxMaxRegs = 64;
/// Blocks per SM the largest softmax kernel is built for (__launch_bounds__): 2 × 256
/// threads × at most 128 registers fill the 64 K-register file.
constexpr int kSoftmaxMinBlocks = 2;

/// Every row of the grid is padded to a multiple of 8 elements (16 bytes in bf16), so that
/// every row starts 16-byte aligned: cp.async and ldmatrix move 16 bytes at a time.
constexpr int kRowAlign = 8;

/// Elements from one row of the grid to the next: N rounded up to kRowAlign. The padding
/// columns hold zeros in P (the softmax writes them) and are never read as scores.
CH06_HD constexpr int grid_row_stride(int N) { return (N + kRowAlign - 1) / kRowAlign * kRowAlign; }

/// Scores a softmax thread holds for rows of `ld` elements: 16, 32 or 64 (one template
/// instance each), the smallest that covers the row, or 64 when none does.
CH06_HD constexpr int softmax_regs(int ld) {
  return ld <= kSoftmaxThreads * 16 ? 16 : ld <= kSoftmaxThreads * 32 ? 32 : kSoftmaxMaxRegs;
}
/// True when a row of `ld` elements fits the softmax's registers (one read of S).
CH06_HD constexpr bool softmax_row_in_registers(int ld) { return ld <= kSoftmaxThreads * kSoftmaxMaxRegs; }

/// The warp-per-row softmax (warp_softmax.cuh, variant warp_rows): one warp owns a row of
/// the grid and a block owns kWarpSoftmaxRows rows. 8 warps make the same 256-thread block as
/// every other kernel of the chapter, so that occupancy compares; no barrier ties the warps
/// of a block together, so the number only groups rows into blocks.
constexpr int kWarpSoftmaxRows = 8;
/// Threads of a warp_softmax_tc block: 32 lanes (a warp) for each of its rows.
constexpr int kWarpSoftmaxThreads = kWarpSoftmaxRows * ft::tc::kLanes;
/// Scores a lane keeps in registers, at most: rows of up to 32 · 64 = 2048 elements go to a
/// warp. 64 floats a thread is also row_softmax_tc's largest instance, which fits without
/// spilling; past 2048 a lane would need 128, and at N = 4096 row_softmax_tc is already
/// within 1.4× its bytes time (README, lab notes), so longer rows fall back to it.
constexpr int kWarpSoftmaxMaxRegs = 64;
/// Scores a lane of warp_softmax_tc holds for rows of `ld` elements: 8, 16, 32 or 64 (one
/// instance each: rows up to 256, 512, 1024, 2048), the smallest that covers the row, so a
/// short row does not pay for a long one's registers. 8 is one 16-byte load of bf16 a lane,
/// the least a lane can hold with the chapter's 16-byte loads (two of float32).
CH06_HD constexpr int warp_softmax_regs(int ld) {
  constexpr int w = ft::tc::kLanes;
  return ld <= w * 8 ? 8 : ld <= w * 16 ? 16 : ld <= w * 32 ? 32 : kWarpSoftmaxMaxRegs;
}
/// True when a row of `ld` elements fits one warp's registers (warp_rows uses
/// warp_softmax_tc for it; row_softmax_tc otherwise).
CH06_HD constexpr bool warp_softmax_fits(int ld) { return ld <= ft::tc::kLanes * kWarpSoftmaxMaxRegs; }

/// Which softmax kernel a variant runs.
enum class SoftmaxKernel {
  BlockPerRow,  ///< row_softmax_tc for every row (grid_f32, grid_half)
  WarpPerRow,   ///< warp_softmax_tc for rows that fit a warp, row_softmax_tc past them (warp_rows)
};

/// Columns of P row i (of a head) the softmax writes: all ld when not causal; causal, up to
/// the end of the key tiles O = P·V reads for i's query tile (zeros past the diagonal),
/// i.e. min(ld, ⌈(i+1)/kPvRows⌉·kPvRows). Tiles of P further right are never read.
CH06_HD constexpr int p_columns_written(int N, bool causal, int i) {
  const int ld = grid_row_stride(N);
  if (!causal) return ld;
  const int end = (i / kPvRows + 1) * kPvRows;
  return end < ld ? end : ld;
}

/// The workspace: the B·H·N·ld grid of scores (4 or 2 bytes an element); P is written over
/// S in place, row by row (in float32 storage, P row i fills the first half of S row i).
size_t workspace_bytes(const ft::Problem& p, ScoreStorage storage);

/// The memory ledger: three lines, qk_scores_tc, row_softmax_tc (or warp_softmax_tc, for a
/// WarpPerRow softmax on rows that fit a warp: the same bytes), pv_output_tc.
std::vector<ft::KernelTraffic> traffic(const ft::Problem& p, ScoreStorage storage,
                                       SoftmaxKernel softmax = SoftmaxKernel::BlockPerRow);

/// S kept in float32: the softmax reads 4-byte scores and writes P in the dtype.
const ft::ForwardImpl& grid_f32();
/// S rounded to the dtype: 2-byte scores, half of grid_f32's S traffic, 8 (bf16) or 11
/// (fp16) significant bits of each score going into the exponential.
const ft::ForwardImpl& grid_half();
/// grid_half with a warp per softmax row (warp_softmax.cuh) for rows of up to 2048 elements,
/// row_softmax_tc past them: the same bytes, less work per row.
const ft::ForwardImpl& warp_rows();
/// The fastest measured variant (warp_rows; README, "A warp per row"): the alias "ch06" of the
/// C API's ft_forward and the tour's chapter 06 row.
const ft::ForwardImpl& fastest();

/// grid_f32, grid_half, warp_rows.
std::vector<ft::ForwardImpl> forward_impls();

}  // namespace ch06
