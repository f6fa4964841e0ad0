/// @file timer.cu
#include "device/timer.cuh"

#include <algorithm>
#include <vector>

namespace ft {

namespace {
/// A CUDA event pair owned for one timing loop.
struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  EventPair() {
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~EventPair() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
};

/// Stop repeating once this much timed work has run (after at least kMinIters): chapter 01
/// at N = 16384 takes about a second a run, and past a few seconds more repeats move the
/// median less than run-to-run noise does.
constexpr double kMaxTimedMs = 5000.0;
constexpr int kMinIters = 3;
}  // namespace

Timing time_on_gpu(const std::function<void(cudaStream_t)>& fn, int warmup, int iters,
                   bool flush_l2, cudaStream_t stream) {
  for (int i = 0; i < warmup; ++i) fn(stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));

  // Writing twice the L2's size evicts whatever the previous run left there.
  DeviceBuffer<unsigned char> flush;
  if (flush_l2) {
    int device = 0, l2_bytes = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
    flush = DeviceBuffer<unsigned char>(2 * size_t(l2_bytes));
  }
  EventPair ev;
  std::vector<float> ms;
  double total = 0;
  for (int i = 0; i < iters; ++i) {
    if (flush_l2) CUDA_CHECK(cudaMemsetAsync(flush.get(), i & 0xFF, flush.bytes(), stream));
    CUDA_CHECK(cudaEventRecord(ev.start, stream));
    fn(stream);
    CUDA_CHECK(cudaEventRecord(ev.stop, stream));
    CUDA_CHECK(cudaEventSynchronize(ev.stop));
    float t = 0;
    CUDA_CHECK(cudaEventElapsedTime(&t, ev.start, ev.stop));
    ms.push_back(t);
    total += t;
    if (int(ms.size()) >= kMinIters && total > kMaxTimedMs) break;
  }
  std::sort(ms.begin(), ms.end());
  Timing r;
  r.iters = int(ms.size());
  r.median_ms = ms.size() % 2 ? ms[ms.size() / 2] : 0.5 * (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]);
  r.min_ms = ms.front();
  r.max_ms = ms.back();
  return r;
}

double measure_copy_bandwidth(size_t bytes, int iters) {
  DeviceBuffer<unsigned char> src(bytes), dst(bytes);
  CUDA_CHECK(cudaMemset(src.get(), 1, bytes));
  const Timing t = time_on_gpu(
      [&](cudaStream_t s) {
        CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, s));
      },
      2, iters, true);
  return 2.0 * double(bytes) / (t.median_ms * 1e-3);  // read + write, bytes per second
}

}  // namespace ft
