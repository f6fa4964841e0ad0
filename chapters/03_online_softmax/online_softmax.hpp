/// @file online_softmax.hpp
/// @brief Chapter 03: the online softmax, which finds a row's maximum and its sum of
/// exponentials in one read (common/cuda_core/online_softmax.cuh holds the update itself). Used for
/// attention (between chapter 02's tiled products) and, on its own, as a row softmax
/// benchmarked against the device's copy bandwidth.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "harness/harness.hpp"
#include "harness/options.hpp"
#include "core/problem.hpp"
#include "harness/table.hpp"
#include "harness/traffic.hpp"

namespace ch03 {

/// S = scale·Q·Kᵀ and O = P·V with chapter 02's tiled_matmul, P = attention_softmax(S).
/// Workspace: the B·H·N·N float grid, S then P in place.
const ft::ForwardImpl& online();

/// Every forward implementation of this chapter (just online()).
std::vector<ft::ForwardImpl> forward_impls();

/// The chapter's memory ledger: one line per kernel.
std::vector<ft::KernelTraffic> traffic(const ft::Problem& p);

/// In place over B·H·N rows of N: S holds scale·QKᵀ; on return it holds P (masked
/// entries 0), and lse[row] = log Σ_j exp(S_row,j) over visible j. Causal: row i of each
/// head sees columns j <= i.
void attention_softmax(const ft::Problem& p, float* S, float* lse, cudaStream_t stream);
ft::KernelTraffic attention_softmax_traffic(const ft::Problem& p);

/// The online softmax of `rows` rows of `cols` floats, one block per row, two reads (max
/// and sum together, then normalize). `out` may equal `in`; `lse` (may be null) gets
/// log Σ_j exp(in[j]) per row. Causal: the rows form square cols×cols grids and row r sees
/// columns j ≤ r mod cols; the others get 0. attention_softmax() is this on the grid.
void online_softmax_rows(const float* in, float* out, float* lse, int64_t rows, int cols,
                         bool causal, cudaStream_t stream);

/// The two row softmaxes the benchmark compares.
enum class RowSoftmax {
  Safe = 0,    ///< chapter 02's kernel: three passes over the row (max, sum, normalize)
  Online = 1,  ///< one read: the row held in registers (two reads for rows over kRegisterRowMax)
};

/// The longest row the online variant keeps in registers (128 threads × 128 floats).
constexpr int kRegisterRowMax = 16384;

/// out[r, :] = softmax(in[r, :]) for `rows` independent rows of `cols` floats (no mask, no
/// scale); `out` may equal `in`. Launches on `stream` without synchronising.
void row_softmax(RowSoftmax variant, const float* in, float* out, int64_t rows, int cols,
                 cudaStream_t stream);

/// The ledger line of row_softmax for that variant and size (the kernel it would launch).
ft::KernelTraffic row_softmax_traffic(RowSoftmax variant, int64_t rows, int cols);

/// The row-softmax benchmark (ProgramSpec::extra): about 1 GiB of rows of `--seq-len`
/// floats, safe and online variants, each timed, verified on sampled rows against float64
/// and compared with a device-to-device copy of the same bytes. Appends two rows (pass
/// "softmax"); throws ft::WrongResult after appending them if either was wrong.
void row_softmax_benchmark(const ft::Options& options, std::vector<ft::Row>& rows);

}  // namespace ch03

/// Chapter 03's row softmax for C callers (and, through ctypes, Python's
/// flashtut.row_softmax): `rows` rows of `cols` floats, variant 0 the safe three-pass kernel,
/// 1 the online one-read kernel. `in` and `out` need only float alignment (4 bytes): the
/// kernel falls back to scalar loads when they are not 16-byte aligned. 0, or -1 with
/// ft_last_error() set, or a cudaError_t, as every function of flashtut.h returns.
extern "C" int ft_ch03_row_softmax(int variant, const float* in, float* out, int64_t rows,
                                   int cols, cudaStream_t stream);
