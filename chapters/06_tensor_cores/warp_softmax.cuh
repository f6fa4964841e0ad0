/// @file warp_softmax.cuh
/// @brief Kernel 2 of 3 in the variant warp_rows: P = softmax(S) with one warp per row of the
/// grid instead of one 256-thread block per row.
///
/// What changed from grid_half (row_softmax.cuh): nothing in what is read or written, only
/// who reads it. row_softmax_tc gives every row a block of 256 threads and merges their 256
/// online-softmax states through shared memory with barriers (ft::block_merge); at N = 1024
/// in bf16 half of those threads hold no score, and each of the 524,288 rows (16384 tokens,
/// H = 32) pays a block's launch slot and two barriers for 4 KB of traffic: the softmax ran
/// at 4.7× its bytes time there (README, lab notes "N = 1024: the softmax's rows"). Here a
/// row that fits a warp's registers (ld ≤ 32 · 64 = 2048) is one warp's: each lane keeps its
/// scores as floats, takes chapter 03's online softmax over them exactly as a thread of
/// row_softmax_tc does, and the 32 states merge by shuffles (ft::warp_merge, common/cuda_core/reduce.cuh),
/// so a block of 8 warps works on 8 rows with no shared memory and no __syncthreads. Longer
/// rows go to row_softmax_tc unchanged (tensor_cores.cu), so the variant runs every N.
///
/// The contract is row_softmax_tc's: S read as float32 or the dtype (ScoreStorage) in
/// 16-byte pieces, only those holding visible scores; P written over S in the dtype, row r of
/// P where row r of S starts (p_ld, the first half of S's row in float32 storage), zeros for
/// masked keys and padding up to p_columns_written(), nothing past it; the natural-log lse in
/// float32.
///
/// Run it (from the repository root, after `cmake --build build --target ch06_tensor_cores`):
///   ./build/chapters/06_tensor_cores/ch06_tensor_cores --variant warp_rows --seq-len 1024 --batch 16
#pragma once

#include <cstdint>

#include "06_tensor_cores/row_softmax.cuh"
#include "06_tensor_cores/tensor_cores.hpp"
#include "core/check.cuh"
#include "cuda_core/online_softmax.cuh"
#include "cuda_core/reduce.cuh"
#include "sm80/pack.cuh"

namespace ch06 {

/// Blocks per SM each instance is built for (__launch_bounds__' second argument caps the
/// registers at 65536 / (256 · blocks): 42, 51, 64, 128). The row's kRegs floats plus 20 to
/// 50 of bookkeeping must fit under the cap without spilling: ptxas -v (CUDA 13.0) gives 30,
/// 39–42, 59–62 and 102–111 registers, no spills (README lab notes "Registers and shared
/// memory"), so the 8- and 16-score instances actually hold 8 and 5–6 blocks an SM. More
/// resident warps keep more rows' loads in flight, which is what a memory-bound kernel needs;
/// the 64-score instance cannot have 3 blocks (85 registers): ptxas then spills 36-40 bytes.
constexpr int warp_softmax_min_blocks(int regs) {
  return regs <= 8 ? 6 : regs <= 16 ? 5 : regs <= 32 ? 4 : 2;
}

// One warp per row, kRegs scores a lane: rows of up to 32 · kRegs elements, in registers.
// `rows` is B·H·N: the last block's warps past it have no row and leave at once.
template <class Score, class T, int kRegs>
__global__ void __launch_bounds__(kWarpSoftmaxThreads, warp_softmax_min_blocks(kRegs))
    warp_softmax_tc(const SoftmaxParams<Score, T> p, const int64_t rows) {
  constexpr int kVec = 16 / int(sizeof(Score));  // scores per 16-byte load: 4 or 8
  constexpr int kItems = kRegs / kVec;           // 16-byte loads a lane
  static_assert(kRegs % kVec == 0 && kRowAlign % kVec == 0, "loads never straddle a row end");
  const int lane = int(threadIdx.x) % ft::kWarpSize;
  const int64_t row = int64_t(blockIdx.x) * kWarpSoftmaxRows + int(threadIdx.x) / ft::kWarpSize;
  // A whole warp leaves together, so the shuffles below always see all 32 lanes.
  if (row >= rows) return;
  const int i = int(row % p.N);
  const int visible = p.causal ? i + 1 : p.N;  // key j visible to query i iff j <= i
  const int written = p_columns_written(p.N, p.causal, i);  // ≤ ld ≤ 32·kRegs: one sweep
  const Score* s = p.S + row * p.ld;
  T* out = p.P + row * p.p_ld;

  // Lane l's loads are 16-byte pieces l, l + 32, …: a warp reads 512 contiguous bytes per
  // load, as a warp of row_softmax_tc does. Scores at or past `visible` become -inf
  // (weight 0) without being read.
  float x[kItems][kVec];
#pragma unroll
  for (int it = 0; it < kItems; ++it)
    load_piece<Score>(s, (it * ft::kWarpSize + lane) * kVec, visible, x[it]);

  // This lane's max, then its exponentials against it (fold_scores, as a thread of
  // row_softmax_tc does).
  ft::OnlineSoftmax mine = ft::online_softmax_empty();
  fold_scores(mine, x);

  // The 32 states merge by shuffles into the row's (m, l), every lane getting it. Every
  // lane's stores below depend on every other lane's loaded scores through these shuffles,
  // so no lane writes P over S before the whole row has been read: no barrier needed.
  const ft::OnlineSoftmax all = ft::warp_merge(mine);
  const float row_base = ft::online_exp_base(all.m), inv_l = 1.f / all.l;

  // Rescale this lane's exponentials from its own max to the row's and divide by l, in one
  // factor (0 for a lane that saw no visible score), and store P for columns below
  // `written` (zeros past `visible`), kVec values per store: the one write.
  const float factor = exp2f(mine.m - row_base) * inv_l;
#pragma unroll
  for (int it = 0; it < kItems; ++it) {
    const int c0 = (it * ft::kWarpSize + lane) * kVec;
    if (c0 >= written) continue;
    uint32_t w[kVec / 2];
#pragma unroll
    for (int k = 0; k < kVec / 2; ++k)
      w[k] = ft::tc::pack2<T>(x[it][2 * k] * factor, x[it][2 * k + 1] * factor);
    if constexpr (kVec == 4) *reinterpret_cast<uint2*>(out + c0) = make_uint2(w[0], w[1]);
    else *reinterpret_cast<uint4*>(out + c0) = make_uint4(w[0], w[1], w[2], w[3]);
  }
  if (lane == 0) p.lse[row] = ft::online_lse(all);
}

/// Blocks of warp_softmax_tc for `rows` rows of the grid: kWarpSoftmaxRows rows a block.
inline int64_t warp_softmax_blocks(int64_t rows) {
  return (rows + kWarpSoftmaxRows - 1) / kWarpSoftmaxRows;
}

/// Launches the instance whose lanes cover a row of sp.ld elements (warp_softmax_regs) on
/// `blocks` = warp_softmax_blocks(rows) blocks. Only for rows that fit: warp_softmax_fits(ld).
template <class Score, class T>
void launch_warp_softmax(const SoftmaxParams<Score, T>& sp, int64_t rows, unsigned blocks,
                         cudaStream_t stream) {
  constexpr int kThreads = kWarpSoftmaxThreads;
  switch (warp_softmax_regs(sp.ld)) {
    case 8: warp_softmax_tc<Score, T, 8><<<blocks, kThreads, 0, stream>>>(sp, rows); break;
    case 16: warp_softmax_tc<Score, T, 16><<<blocks, kThreads, 0, stream>>>(sp, rows); break;
    case 32: warp_softmax_tc<Score, T, 32><<<blocks, kThreads, 0, stream>>>(sp, rows); break;
    default: warp_softmax_tc<Score, T, kWarpSoftmaxMaxRegs><<<blocks, kThreads, 0, stream>>>(sp, rows);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace ch06
