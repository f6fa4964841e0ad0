/// @file row_softmax.cuh
/// @brief Kernel 2 of 3: P = softmax(S) over each row of the grid, one block per row, with
/// chapter 03's online softmax: the row is read once into registers, each thread folds its
/// scores into a running (m, l), the block merges the 256 states, and P is written from the
/// registers in the dtype, over S, with the natural-log lse of the row in float32.
///
/// Scores are float32 or the dtype (ScoreStorage); every computation is in float32.
#pragma once

#include <cstdint>
#include <type_traits>

#include "06_tensor_cores/tensor_cores.hpp"
#include "cuda_core/online_softmax.cuh"
#include "cuda_core/reduce.cuh"
#include "sm80/pack.cuh"

namespace ch06 {

template <class Score, class T>
struct SoftmaxParams {
  const Score* S;  ///< the grid of scores, [B·H·N][ld]
  T* P;            ///< the same memory: P row r starts where S row r does, [B·H·N][p_ld]
  float* lse;      ///< [B·H·N]
  int N;
  int ld;          ///< grid_row_stride(N): elements of S from one row to the next
  int p_ld;        ///< elements of P from one row to the next: ld·sizeof(Score)/sizeof(T)
  bool causal;
};

/// Eight scores to float: four of float32 or eight of bf16/fp16, one 16-byte load's worth.
template <class Score, int V>
__device__ __forceinline__ void unpack(const uint4& raw, float (&x)[V]) {
  static_assert(V * sizeof(Score) == 16, "one 16-byte load");
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    if constexpr (std::is_same_v<Score, float>) {
      x[k] = __uint_as_float(w[k]);
    } else if constexpr (std::is_same_v<Score, __nv_bfloat16>) {  // bf16: float's top half
      x[2 * k] = __uint_as_float(w[k] << 16);
      x[2 * k + 1] = __uint_as_float(w[k] & 0xFFFF0000u);
    } else {
      x[2 * k] = __half2float(__ushort_as_half(static_cast<unsigned short>(w[k] & 0xFFFFu)));
      x[2 * k + 1] = __half2float(__ushort_as_half(static_cast<unsigned short>(w[k] >> 16)));
    }
  }
}

/// The 16-byte piece of scores at column c0 into x (kVec floats); columns at or past
/// `visible` become -inf (weight 0) without being read.
template <class Score, int V>
__device__ __forceinline__ void load_piece(const Score* s, int c0, int visible, float (&x)[V]) {
  if (c0 < visible) unpack<Score>(*reinterpret_cast<const uint4*>(s + c0), x);
#pragma unroll
  for (int e = 0; e < V; ++e)
    if (c0 + e >= visible) x[e] = -INFINITY;
}

/// One thread's fold of the scores it holds into its running (m, l): their max, then
/// their exponentials against it, which replace the scores in x and add up to l. Base-2
/// units: 2^(s·log2 e − m) = e^(s − m/log2 e).
template <int kItems, int kVec>
__device__ __forceinline__ void fold_scores(ft::OnlineSoftmax& mine, float (&x)[kItems][kVec]) {
  float m = -INFINITY;
#pragma unroll
  for (int it = 0; it < kItems; ++it)
#pragma unroll
    for (int e = 0; e < kVec; ++e) m = fmaxf(m, x[it][e]);
  ft::online_rescale(mine, m * ft::kLog2e);
  const float base = ft::online_exp_base(mine.m);
  float l = 0.f;
#pragma unroll
  for (int it = 0; it < kItems; ++it)
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      x[it][e] = exp2f(fmaf(x[it][e], ft::kLog2e, -base));
      l += x[it][e];
    }
  mine.l += l;
}

/// Blocks per SM each instance is built for: registers of row data (kRegs) plus about 30 of
/// bookkeeping must fit 65536 / (256 · blocks).
constexpr int softmax_min_blocks(int regs) { return regs <= 16 ? 4 : regs <= 32 ? 3 : kSoftmaxMinBlocks; }

// kRegs scores a thread: rows of up to 256·kRegs elements in one sweep, in registers.
template <class Score, class T, int kRegs>
__global__ void __launch_bounds__(kSoftmaxThreads, softmax_min_blocks(kRegs))
    row_softmax_tc(const SoftmaxParams<Score, T> p) {
  constexpr int kVec = 16 / int(sizeof(Score));  // scores per 16-byte load: 4 or 8
  constexpr int kItems = kRegs / kVec;           // 16-byte loads a thread per sweep
  constexpr int kSweep = kSoftmaxThreads * kRegs;  // columns one sweep covers
  static_assert(kRegs % kVec == 0 && kRowAlign % kVec == 0, "loads never straddle a row end");
  __shared__ ft::OnlineSoftmax scratch[ft::kWarpSize];  // one state per warp

  const int64_t row = blockIdx.x;  // b·H·N + h·N + i
  const int i = int(row % p.N);
  const int visible = p.causal ? i + 1 : p.N;  // key j visible to query i iff j <= i
  const int written = p_columns_written(p.N, p.causal, i);
  const int sweeps = (written + kSweep - 1) / kSweep;  // 1 for rows up to 16384 (softmax_regs)
  const Score* s = p.S + row * p.ld;
  T* out = p.P + row * p.p_ld;

  // Thread t's loads are 16-byte pieces t, t + 256, …: a warp reads 512 contiguous bytes.
  // Scores at or past `visible` become -inf (weight 0) without being read.
  float x[kItems][kVec];
  auto load = [&](int sweep) {
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
      load_piece<Score>(s, sweep * kSweep + (it * kSoftmaxThreads + int(threadIdx.x)) * kVec,
                        visible, x[it]);
    }
  };
  // P for columns below `written` (zeros past `visible`), kVec values per store.
  auto store = [&](int sweep) {
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
      const int c0 = sweep * kSweep + (it * kSoftmaxThreads + int(threadIdx.x)) * kVec;
      if (c0 >= written) continue;
      uint32_t w[kVec / 2];
#pragma unroll
      for (int k = 0; k < kVec / 2; ++k) w[k] = ft::tc::pack2<T>(x[it][2 * k], x[it][2 * k + 1]);
      if constexpr (kVec == 4) *reinterpret_cast<uint2*>(out + c0) = make_uint2(w[0], w[1]);
      else *reinterpret_cast<uint4*>(out + c0) = make_uint4(w[0], w[1], w[2], w[3]);
    }
  };

  // The one read (per sweep), folded into this thread's running (m, l) (fold_scores).
  ft::OnlineSoftmax mine = ft::online_softmax_empty();
  for (int sweep = 0; sweep < sweeps; ++sweep) {
    load(sweep);
    fold_scores(mine, x);
  }
  // The 256 states merge into the row's (m, l); the barriers inside also mean that every
  // thread has read its scores before any thread writes P over them.
  const ft::OnlineSoftmax all = ft::block_merge(mine, scratch);
  const float row_base = ft::online_exp_base(all.m), inv_l = 1.f / all.l;

  if (sweeps == 1) {
    // Rescale this thread's exponentials from its own max to the row's, and divide by l,
    // in one factor (0 for a thread that saw no visible score). The one write.
    const float factor = exp2f(mine.m - row_base) * inv_l;
#pragma unroll
    for (int it = 0; it < kItems; ++it)
#pragma unroll
      for (int e = 0; e < kVec; ++e) x[it][e] *= factor;
    store(0);
  } else {
    // Rows longer than the registers: read each sweep again. P of sweep k lands on bytes
    // of S that sweeps ≤ k held, so one barrier per sweep keeps the reads ahead of it.
    for (int sweep = 0; sweep < sweeps; ++sweep) {
      load(sweep);
      __syncthreads();
#pragma unroll
      for (int it = 0; it < kItems; ++it)
#pragma unroll
        for (int e = 0; e < kVec; ++e) x[it][e] = exp2f(fmaf(x[it][e], ft::kLog2e, -row_base)) * inv_l;
      store(sweep);
    }
  }
  if (threadIdx.x == 0) p.lse[row] = ft::online_lse(all);
}

}  // namespace ch06
