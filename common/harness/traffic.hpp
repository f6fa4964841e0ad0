/// @file traffic.hpp
/// @brief The traffic model: bytes each kernel reads and writes, and the FLOPs it does, as
/// formulas in B, H, N, d and the tile sizes. Each chapter composes its ledger from these
/// pieces next to its kernels (`chNN::traffic()`); the tests check the formulas by hand.
///
/// Two figures per kernel, because caches matter:
/// - *requested* bytes: what the kernel's loads and stores ask of global memory, counting
///   every re-read of a tile (Nsight Compute: L2-side sector counters);
/// - *DRAM* bytes: what reaches device memory once the 60 MiB L2 has served re-reads
///   (Nsight Compute: `dram__bytes_read.sum`, `dram__bytes_write.sum`). The ledger's
///   `note` says why the figure is what it is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/problem.hpp"

namespace ft {

constexpr double kFloatBytes = 4.0;  ///< everything in chapters 01–05 is float32

/// What the model needs to know of the GPU: how much the L2 holds, and how many threads the
/// whole chip runs at once (how much data the blocks in flight touch together).
struct GpuFacts {
  double sms = 132;                          ///< multiprocessors
  double l2_bytes = 60.0 * 1024 * 1024;      ///< L2 capacity
  double threads_per_sm = 2048;              ///< resident threads per SM (sm_75: 1024, sm_86/89: 1536)
  double smem_per_sm = 228.0 * 1024;         ///< shared memory per SM
  std::string source = "NVIDIA H200 (built-in default: no GPU here)";  ///< where they came from

  double resident_threads() const { return sms * threads_per_sm; }
};

/// The H200's figures (from cudaGetDeviceProperties on one): the model's default when there
/// is no GPU, so that the predictions printed on a laptop are the ones the H200 results use.
GpuFacts h200_facts();

/// The facts of device 0 when there is one, else h200_facts(); read once per process.
/// Every ledger uses these, and print_ledger says which were used.
const GpuFacts& gpu_facts();

/// L2 capacity the model assumes. The DRAM model counts a re-read as an L2 hit when the data
/// re-read concurrently fits in half of it (the other half holds the streams that pass through).
inline double l2_bytes() { return gpu_facts().l2_bytes; }

/// Threads the whole GPU holds at once: SMs × resident threads per SM.
inline double resident_threads() { return gpu_facts().resident_threads(); }

/// One kernel's line in a chapter's memory ledger.
struct KernelTraffic {
  std::string kernel;             ///< the kernel's function name, as Nsight Compute shows it
  double read_bytes = 0;          ///< requested from global memory by loads
  double write_bytes = 0;         ///< requested by stores
  double dram_read_bytes = 0;     ///< predicted to reach DRAM (reads)
  double dram_write_bytes = 0;    ///< predicted to reach DRAM (writes)
  double flops = 0;               ///< floating-point operations (FMA = 2), as the papers count
  std::string note;               ///< why the DRAM figure is what it is, one line

  double requested_bytes() const { return read_bytes + write_bytes; }
  double dram_bytes() const { return dram_read_bytes + dram_write_bytes; }
  /// FLOPs per DRAM byte: where the kernel sits on the roofline.
  double intensity() const { return dram_bytes() > 0 ? flops / dram_bytes() : 0; }
};

/// Sums of a chapter's kernels.
KernelTraffic total(const std::vector<KernelTraffic>& kernels, const std::string& name = "total");

/// Bytes of a matrix of rows×cols floats.
inline double matrix_bytes(double rows, double cols) { return rows * cols * kFloatBytes; }
/// Bytes of a matrix of rows×cols elements of the problem's dtype (2 for bf16 and fp16).
inline double matrix_bytes(const Problem& p, double rows, double cols) {
  return rows * cols * double(dtype_bytes(p.dtype));
}

/// Requested reads of a tiled product C[M×N] = A[M×K]·B[K×N] (per head) whose blocks
/// compute tile_m×tile_n outputs: every block reads its tile_m rows of A and tile_n columns
/// of B in full, so A is read ceil(N/tile_n) times and B ceil(M/tile_m) times.
double tiled_matmul_read_bytes(double M, double N, double K, int tile_m, int tile_n);

/// True when `bytes` of data that one wave of blocks re-reads fits the model's L2 share.
inline bool fits_l2(double bytes) { return bytes <= l2_bytes() / 2; }

/// Visible (query, key) pairs of one head: N_q·N_kv or, causal, Σ_i visible_keys(i)
/// (N(N+1)/2 for equal lengths).
double visible_pairs(const Problem& p);

/// Fraction of a tile grid (tile_q × tile_k tiles over N_q×N_kv) that a causal kernel visits:
/// the tiles that hold a visible key for one of their rows. 1 for non-causal.
double visited_tile_fraction(const Problem& p, int tile_q, int tile_k);

// ---- A fused forward (one kernel: Q tile on chip, K/V tiles streamed) ---------------------

/// Key (and value) rows one head's blocks load in total: each query tile of Br rows loads
/// K/V tiles of Bc rows until its last visible key (all N keys; causal: key q0 + Br − 1),
/// rows past N excluded (they are zero-filled, not read).
double kv_rows_loaded(const Problem& p, int Br, int Bc);

/// The ledger line of a fused forward kernel with query tiles of Br rows and K/V tiles of
/// Bc rows. Requested: Q once, K and V once per query tile (kv_rows_loaded), O and lse
/// once. DRAM: K/V re-reads hit L2 while one head's K+V (2·N·d elements) fits, so Q, K,
/// V, O and lse cross DRAM once. FLOPs: the papers' 4·N²·d per head, halved causal.
/// Elements are of the problem's dtype (4 bytes in chapter 04, 2 in chapter 07's bf16/fp16);
/// the lse is float32 always. Every fused forward's ledger (chapters 04 and 07) is this one.
KernelTraffic fused_forward_traffic(const Problem& p, const char* kernel, int Br, int Bc);

}  // namespace ft
