/// @file timer.cuh
/// @brief Timing with CUDA events: warm-up first, then the median of repeated runs, with
/// the L2 cache flushed before each timed run so that a later run does not find its
/// inputs already on chip and report cache bandwidth as memory bandwidth.
#pragma once

#include <functional>

#include "device/buffer.cuh"

namespace ft {

struct Timing {
  double median_ms = 0, min_ms = 0, max_ms = 0;
  int iters = 0;
  bool graph = false;  ///< each timed run a CUDA graph's replay (time_on_gpu's `graph`)
  /// The results' `timing` column: "graph" (replays) or "call" (launched from the host).
  const char* column() const { return graph ? "graph" : "call"; }
};

/// Times `fn(stream)`: `warmup` untimed calls, then `iters` calls each between two events,
/// each preceded (outside the events) by a write of twice the L2 size when `flush_l2`.
///
/// With `graph`, what `fn` launches is recorded once, after the warm-up, into a CUDA graph,
/// replayed once untimed, and each timed run is one replay on `stream`: the same kernels
/// with the same arguments, launched by the GPU from the graph instead of call by call from
/// the host. Throws ft::CudaError when `fn` cannot be recorded (it synchronizes, allocates,
/// or puts work on the legacy default stream), saying to time it without a graph.
Timing time_on_gpu(const std::function<void(cudaStream_t)>& fn, int warmup, int iters,
                   bool flush_l2 = true, cudaStream_t stream = 0, bool graph = false);

/// Device-to-device copy bandwidth (bytes read + written per second) for `bytes`-byte
/// buffers, timed like the kernels: the memory ceiling the chapters compare against.
double measure_copy_bandwidth(size_t bytes, int iters = 20);

}  // namespace ft
