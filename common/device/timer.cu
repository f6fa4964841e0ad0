/// @file timer.cu
#include "device/timer.cuh"

#include <algorithm>
#include <memory>
#include <string>
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

/// A CUDA graph of what a function launches, recorded once and replayed, owned for one
/// timing loop (its stream, graph and instance are released however the recording ends).
class Recorded {
 public:
  // A blocking stream: work a recorded function puts on the legacy default stream (0) would
  // make that stream wait on the recording, which CUDA refuses, so such work fails the
  // recording instead of running outside the graph unseen.
  Recorded() { CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamDefault)); }
  ~Recorded() {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream_, &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) {
      cudaGraph_t partial = nullptr;  // fn threw while recording: end the capture, drop what it holds
      cudaStreamEndCapture(stream_, &partial);
      if (partial) cudaGraphDestroy(partial);
      (void)cudaGetLastError();  // the ended recording's error, not left for the next launch check
    }
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
    cudaStreamDestroy(stream_);
  }
  Recorded(const Recorded&) = delete;
  Recorded& operator=(const Recorded&) = delete;

  /// Records fn's launches. The legacy default stream (0) cannot be recorded, so fn runs on
  /// this object's stream. Thread-local mode: a call of this thread that is not allowed while
  /// recording (a synchronization, cudaMalloc, work on stream 0) fails at once instead of
  /// being left out.
  void record(const std::function<void(cudaStream_t)>& fn) {
    CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    try {
      fn(stream_);
    } catch (const CudaError& e) {
      throw CudaError(e.code(), uncapturable(e.what()));
    }
    if (const cudaError_t ended = cudaStreamEndCapture(stream_, &graph_); ended != cudaSuccess) {
      (void)cudaGetLastError();  // reported here, not left for the next launch check
      throw CudaError(ended, uncapturable(std::string("cudaStreamEndCapture: ") + cudaGetErrorString(ended)));
    }
    checked(cudaGraphInstantiate(&exec_, graph_, 0), "cudaGraphInstantiate", __LINE__);
  }

  void replay(cudaStream_t stream) const { checked(cudaGraphLaunch(exec_, stream), "cudaGraphLaunch", __LINE__); }

 private:
  static std::string uncapturable(const std::string& why) {
    return "this run cannot be recorded as a CUDA graph (it synchronizes, allocates or uses the "
           "default stream while it runs); time it without --graph. " + why;
  }
  /// CUDA_CHECK, with the error also taken off the thread's last error, so that the next
  /// launch check does not report it again as its own.
  static void checked(cudaError_t code, const char* call, int line) {
    if (code == cudaSuccess) return;
    (void)cudaGetLastError();
    check_cuda(code, call, __FILE__, line);
  }
  cudaStream_t stream_ = nullptr;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

/// Stop repeating once this much timed work has run (after at least kMinIters): chapter 01
/// at N = 16384 takes about a second a run, and past a few seconds more repeats move the
/// median less than run-to-run noise does.
constexpr double kMaxTimedMs = 5000.0;
constexpr int kMinIters = 3;
}  // namespace

Timing time_on_gpu(const std::function<void(cudaStream_t)>& fn, int warmup, int iters,
                   bool flush_l2, cudaStream_t stream, bool graph) {
  for (int i = 0; i < warmup; ++i) fn(stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  // Recorded after the warm-up, so that what a first call does once (a kernel's shared
  // memory attribute, an occupancy query the library keeps) is not in the graph's way.
  std::unique_ptr<Recorded> recorded;
  if (graph) {
    recorded = std::make_unique<Recorded>();
    recorded->record(fn);
    recorded->replay(stream);  // a graph's first launch uploads it: left out of the timing
    CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  const auto run = [&] { recorded ? recorded->replay(stream) : fn(stream); };

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
    run();
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
  r.graph = graph;
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
