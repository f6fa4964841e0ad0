/// @file row_softmax.cu
/// @brief Chapter 03's softmax on its own: independent rows, no mask, measured against the
/// device's copy bandwidth. The safe softmax (chapter 02's kernel) reads every row three
/// times; the online one reads it once, keeps it in registers, and writes it once: the same
/// bytes a copy moves, so it can run at nearly copy speed.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>

#include "02_tiled/tiled.hpp"
#include "03_online_softmax/online_softmax.hpp"
#include "device/buffer.cuh"
#include "api/capi.hpp"
#include "core/check.cuh"
#include "reference/inputs.hpp"
#include "cuda_core/online_softmax.cuh"
#include "cuda_core/reduce.cuh"
#include "device/timer.cuh"
#include "harness/verify.hpp"

namespace ch03 {
namespace {

// Threads per row in the register kernel: 4 warps. A row of 16384 floats is 64 KB of
// registers however it is split; the fewer threads share it, the fewer registers go to each
// thread's bookkeeping (indices, pointers, m, l) and the more rows fit on an SM at once.
constexpr int kThreads = 128;

/// Online softmax of one row per block, with the row held in registers: one read, one write.
/// Thread t holds float4 number t, t + 128, t + 256, … of the row in v[] (indexed only
/// with compile-time constants after unrolling, so v[] lives in registers).
template <int kVecs, int kMinBlocksPerSm>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)
    online_softmax_registers_kernel(const float4* in, float4* out, int vecs_per_row) {
  __shared__ ft::OnlineSoftmax scratch[ft::kWarpSize];  // one state per warp
  const int64_t row = blockIdx.x;
  const float4* x = in + row * vecs_per_row;
  float4* y = out + row * vecs_per_row;

  // The one read: all kVecs 16-byte loads are issued back to back, all in flight at once.
  // Past the end of the row: -inf, whose exponential is 0.
  float4 v[kVecs];
#pragma unroll
  for (int r = 0; r < kVecs; ++r) {
    const int q = r * kThreads + threadIdx.x;
    v[r] = q < vecs_per_row ? x[q] : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
  }

  // This thread's state: its maximum m (base 2), then its exponentials against m, which
  // replace the scores in v[] and add up to l.
  float m = -INFINITY;
#pragma unroll
  for (int r = 0; r < kVecs; ++r) m = fmaxf(m, fmaxf(fmaxf(v[r].x, v[r].y), fmaxf(v[r].z, v[r].w)));
  m *= ft::kLog2e;
  const float base = ft::online_exp_base(m);
  float l = 0.f;
#pragma unroll
  for (int r = 0; r < kVecs; ++r) {
    v[r].x = exp2f(fmaf(v[r].x, ft::kLog2e, -base));
    v[r].y = exp2f(fmaf(v[r].y, ft::kLog2e, -base));
    v[r].z = exp2f(fmaf(v[r].z, ft::kLog2e, -base));
    v[r].w = exp2f(fmaf(v[r].w, ft::kLog2e, -base));
    l += (v[r].x + v[r].y) + (v[r].z + v[r].w);
  }

  // The 128 states merge into the row's (m, l): the online softmax's merge rule.
  const ft::OnlineSoftmax s = ft::block_merge({m, l}, scratch);

  // Each thread's exponentials were taken against its own maximum: rescale them to the
  // row's by 2^(m - m_row), and divide by l, in one factor. The one write.
  const float factor = exp2f(m - ft::online_exp_base(s.m)) / s.l;
#pragma unroll
  for (int r = 0; r < kVecs; ++r) {
    const int q = r * kThreads + threadIdx.x;
    if (q < vecs_per_row)
      y[q] = make_float4(v[r].x * factor, v[r].y * factor, v[r].z * factor, v[r].w * factor);
  }
}

// Two sizes of the register kernel. Small: 8 float4 a thread (rows up to 4096 floats),
// capped at 64 registers so that 8 rows are in flight per SM. Large: 32 float4 a thread
// (rows up to kRegisterRowMax = 16384 floats, 128 registers of row data), capped at 170 so
// that 3 rows (192 KB of the 256 KB register file) are in flight per SM.
constexpr int kSmallVecs = 8, kSmallBlocksPerSm = 8;
constexpr int kLargeVecs = 32, kLargeBlocksPerSm = 3;
static_assert(kThreads * 4 * kLargeVecs == kRegisterRowMax, "kRegisterRowMax is the large size");

template <int kVecs, int kMinBlocksPerSm>
void launch_registers(const float* in, float* out, int64_t rows, int cols, cudaStream_t stream) {
  online_softmax_registers_kernel<kVecs, kMinBlocksPerSm><<<unsigned(rows), kThreads, 0, stream>>>(
      reinterpret_cast<const float4*>(in), reinterpret_cast<float4*>(out), cols / 4);
  CUDA_CHECK_LAUNCH();
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

/// The register kernel needs float4 rows: cols a multiple of 4 and 16-byte aligned data.
bool fits_registers(const float* in, const float* out, int cols) {
  return cols % 4 == 0 && cols <= kRegisterRowMax && aligned16(in) && aligned16(out);
}

const char* variant_name(RowSoftmax v) {
  return v == RowSoftmax::Safe ? "row_softmax_safe" : "row_softmax_online";
}

}  // namespace

void row_softmax(RowSoftmax variant, const float* in, float* out, int64_t rows, int cols,
                 cudaStream_t stream) {
  if (rows < 0 || cols < 1) throw ft::Unsupported("row_softmax: need rows >= 0 and cols >= 1");
  if (rows > INT_MAX)
    throw ft::Unsupported("row_softmax: " + std::to_string(rows) + " rows exceed one grid");
  if (rows == 0) return;
  if (variant == RowSoftmax::Safe) {
    ch02::softmax_rows(in, out, nullptr, rows, cols, false, stream);
  } else if (!fits_registers(in, out, cols)) {
    online_softmax_rows(in, out, nullptr, rows, cols, false, stream);  // two reads
  } else if (cols <= kThreads * 4 * kSmallVecs) {
    launch_registers<kSmallVecs, kSmallBlocksPerSm>(in, out, rows, cols, stream);
  } else {
    launch_registers<kLargeVecs, kLargeBlocksPerSm>(in, out, rows, cols, stream);
  }
}

ft::KernelTraffic row_softmax_traffic(RowSoftmax variant, int64_t rows, int cols) {
  const double row_bytes = double(cols) * ft::kFloatBytes;
  const double bytes = double(rows) * row_bytes;
  // Both multi-pass kernels run one 256-thread block per row: 1056 rows in flight.
  const bool rows_fit = ft::fits_l2(std::min(double(rows), ch02::softmax_wave_rows()) * row_bytes);
  // The register kernel needs aligned data too; the model assumes cudaMalloc'd rows.
  const bool in_registers = cols % 4 == 0 && cols <= kRegisterRowMax;
  ft::KernelTraffic t;
  t.write_bytes = bytes;
  t.dram_write_bytes = bytes;
  if (variant == RowSoftmax::Safe) {
    t.kernel = "softmax_rows_kernel";
    t.read_bytes = 3 * bytes;
    t.dram_read_bytes = rows_fit ? bytes : 3 * bytes;
    t.note = rows_fit ? "three reads, the last two from L2" : "three reads, all from DRAM";
  } else if (in_registers) {
    t.kernel = "online_softmax_registers_kernel";
    t.read_bytes = bytes;
    t.dram_read_bytes = bytes;
    t.note = "one read into registers, one write: what a copy moves";
  } else {
    t.kernel = "online_softmax_kernel";
    t.read_bytes = 2 * bytes;
    t.dram_read_bytes = rows_fit ? bytes : 2 * bytes;
    t.note = rows_fit ? "two reads, the second from L2" : "two reads, both from DRAM";
  }
  return t;
}

namespace {

// The benchmark's size: about 1 GiB of rows, far beyond L2, the same bytes for every row
// length so that the numbers compare across --seq-len.
constexpr double kBenchmarkBytes = double(1 << 30);
// Inputs uniform in ±kScoreRange: scores of a few units, like scaled attention logits.
constexpr float kScoreRange = 4.f;
// Rows compared with the float64 reference (spread over the whole output); every element
// of the output is checked for NaN/Inf (the poison of an unwritten one).
constexpr int kSampledRows = 8;

/// Checks the whole output for NaN/Inf, then sampled rows against a float64 softmax.
ft::VerifyResult verify_rows(const std::vector<float>& in, const std::vector<float>& out,
                             int64_t rows, int cols) {
  ft::VerifyResult finite;
  finite.ok = true;
  for (size_t i = 0; i < out.size(); ++i)
    if (!std::isfinite(out[i])) {
      finite.ok = false;
      finite.message = "output " + std::to_string(i) + " is NaN/Inf (unwritten, or overflow)";
      return finite;
    }
  std::vector<double> ref;
  std::vector<float> got;
  for (int k = 0; k < kSampledRows; ++k) {
    const int64_t r = rows == 1 ? 0 : k * (rows - 1) / (kSampledRows - 1);
    const float* x = in.data() + r * cols;
    double m = -INFINITY, l = 0;
    for (int j = 0; j < cols; ++j) m = std::max(m, double(x[j]));
    for (int j = 0; j < cols; ++j) l += std::exp(double(x[j]) - m);
    for (int j = 0; j < cols; ++j) {
      ref.push_back(std::exp(double(x[j]) - m) / l);
      got.push_back(out[r * cols + j]);
    }
  }
  return ft::verify("row softmax", got.data(), ref.data(), got.size(), ft::kFloat32Tolerance);
}

}  // namespace

void row_softmax_benchmark(const ft::Options& o, std::vector<ft::Row>& rows_out) {
  const int cols = o.seq_len;
  const int64_t rows = std::max<int64_t>(1, int64_t(kBenchmarkBytes / (double(cols) * 4)));
  const size_t n = size_t(rows) * cols, bytes = n * sizeof(float);
  std::printf("\nrow softmax benchmark: %lld rows × %d floats (%s read, %s written), no mask\n",
              (long long)rows, cols, ft::format_bytes(double(bytes)).c_str(),
              ft::format_bytes(double(bytes)).c_str());
  try {
    ft::check_fits(2 * bytes, "the row-softmax benchmark");
  } catch (const ft::Unsupported& e) {
    std::printf("(skipped: %s)\n", e.what());
    return;
  }
  // The ceiling: a device-to-device copy reads and writes exactly these bytes.
  const double copy_gbps = ft::measure_copy_bandwidth(bytes, o.iters) / 1e9;
  std::printf("  device-to-device copy of %s: %.0f GB/s (read + write)\n",
              ft::format_bytes(double(bytes)).c_str(), copy_gbps);

  const std::vector<float> host_in = ft::random_uniform(n, o.seed, -kScoreRange, kScoreRange);
  ft::DeviceBuffer<float> in(n), out(n);
  in.upload(host_in);
  std::string wrong;
  for (RowSoftmax variant : {RowSoftmax::Safe, RowSoftmax::Online}) {
    const ft::KernelTraffic model = row_softmax_traffic(variant, rows, cols);
    ft::Row r;
    r.chapter = "03";
    r.variant = variant_name(variant);
    r.pass = "softmax";
    r.batch = int(rows);
    r.heads = 1;
    r.seq_len = cols;
    r.head_dim = 0;
    r.model_bytes = model.dram_bytes();
    r.model_requested_bytes = model.requested_bytes();
    r.gpu = ft::gpu_name();

    out.poison();
    row_softmax(variant, in.get(), out.get(), rows, cols, 0);
    CUDA_CHECK(cudaDeviceSynchronize());
    if (o.verify) {
      const ft::VerifyResult v = verify_rows(host_in, out.download(), rows, cols);
      r.rel_err = v.rel_l2;
      if (!v.ok) wrong += std::string(wrong.empty() ? "" : "; ") + r.variant + ": " + v.message;
    }
    const ft::Timing t = ft::time_on_gpu(
        [&](cudaStream_t s) { row_softmax(variant, in.get(), out.get(), rows, cols, s); },
        o.warmup, o.iters, true, 0, o.graph);
    r.timing = t.column();
    r.ms = t.median_ms;
    r.ms_min = t.min_ms;
    r.ms_max = t.max_ms;
    r.iters = t.iters;
    // Effective bandwidth: one read and one write of the rows (what a copy moves) per
    // second, whatever the kernel really moved; the ratio to the copy is the grade.
    r.gbps = 2.0 * double(bytes) / (t.median_ms * 1e-3) / 1e9;
    const double pct = 100.0 * r.gbps / copy_gbps;
    const bool in_registers = model.kernel == "online_softmax_registers_kernel";
    r.what = std::string(variant == RowSoftmax::Safe ? "three passes (chapter 02)"
                         : in_registers              ? "one read, the row in registers"
                                                     : "two reads (row too long for registers)") +
             "; " + std::to_string(int(pct + 0.5)) + "% of copy";
    std::printf("  %-20s %-32s %9.3f ms %7.0f GB/s %5.1f%% of copy\n", r.variant.c_str(),
                model.kernel.c_str(), r.ms, r.gbps, pct);
    rows_out.push_back(r);
  }
  if (!wrong.empty()) throw ft::WrongResult("row softmax benchmark: " + wrong);
}

}  // namespace ch03

extern "C" int ft_ch03_row_softmax(int variant, const float* in, float* out, int64_t rows,
                                   int cols, cudaStream_t stream) {
  return ft::capi::guarded([&] {
    if (variant != 0 && variant != 1)
      throw ft::Unsupported("ft_ch03_row_softmax: variant must be 0 (safe) or 1 (online), got " +
                            std::to_string(variant));
    ft::capi::check_present({{"in", in}, {"out", out}});
    ft::capi::check_aligned({{"in", in}, {"out", out}}, sizeof(float));
    // A launch is due: row_softmax refuses the other sizes itself, with or without a GPU.
    if (rows > 0 && rows <= INT_MAX && cols >= 1) ft::capi::require_gpu();
    ch03::row_softmax(variant == 0 ? ch03::RowSoftmax::Safe : ch03::RowSoftmax::Online, in, out,
                      rows, cols, stream);
  });
}
