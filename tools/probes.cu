// The ceilings the tensor-core chapters are measured against, each from a register-only
// probe (no memory traffic, so nothing but the unit itself sets the rate):
//
//   mma.sync.m16n8k16 bf16 → f32   the tensor-core rate every chapter-06+ kernel can reach
//   ex2.approx.f32 (MUFU)          the exponential unit: one per score in the softmax
//   FFMA                           the CUDA cores' fused multiply-add (chapters 01–05)
//
//   ./build/tools/ft_probes [--csv probes.csv]
//
// Each probe runs enough blocks to fill every SM several times over, with 8 independent
// chains per thread so that latency hides behind throughput; times with CUDA events, the
// median of 5 runs after a warm-up.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/check.cuh"
#include "sm80/mma.cuh"
#include "device/timer.cuh"

namespace {

constexpr int kThreads = 256;   // 8 warps a block
constexpr int kChains = 8;      // independent accumulators per thread: hides the latency
constexpr int kIters = 4096;    // loop trips: long enough that launch cost is noise

__global__ void __launch_bounds__(kThreads) mma_probe(float* out, uint32_t seed) {
  ft::tc::FragA a{{seed, seed * 3, seed * 5, seed * 7}};
  ft::tc::FragB b{{seed * 11, seed * 13}};
  ft::tc::FragC acc[kChains] = {};
  for (int it = 0; it < kIters; ++it)
#pragma unroll
    for (int c = 0; c < kChains; ++c) ft::tc::mma_m16n8k16<__nv_bfloat16>(acc[c], a, b);
  float s = 0;
#pragma unroll
  for (int c = 0; c < kChains; ++c) s += acc[c].c[0] + acc[c].c[1] + acc[c].c[2] + acc[c].c[3];
  if (s == 1.2345f) out[threadIdx.x] = s;  // never true; keeps the work alive
}

__global__ void __launch_bounds__(kThreads) ex2_probe(float* out, float seed) {
  float x[kChains];
#pragma unroll
  for (int c = 0; c < kChains; ++c) x[c] = seed * (c + 1) * 1e-3f;
  for (int it = 0; it < kIters; ++it)
#pragma unroll
    for (int c = 0; c < kChains; ++c) asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x[c]));
  float s = 0;
#pragma unroll
  for (int c = 0; c < kChains; ++c) s += x[c];
  if (s == 1.2345f) out[threadIdx.x] = s;
}

__global__ void __launch_bounds__(kThreads) ffma_probe(float* out, float seed) {
  float x[kChains];
#pragma unroll
  for (int c = 0; c < kChains; ++c) x[c] = seed * (c + 1);
  for (int it = 0; it < kIters; ++it)
#pragma unroll
    for (int c = 0; c < kChains; ++c) x[c] = fmaf(x[c], 0.999f, 1e-3f);
  float s = 0;
#pragma unroll
  for (int c = 0; c < kChains; ++c) s += x[c];
  if (s == 1.2345f) out[threadIdx.x] = s;
}

}  // namespace

int main(int argc, char** argv) {
  const char* csv = argc == 3 && std::strcmp(argv[1], "--csv") == 0 ? argv[2] : nullptr;
  try {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    if (prop.major < 8) {
      std::fprintf(stderr, "ft_probes: needs sm_80 or newer (mma.sync bf16); %s is sm_%d%d\n",
                   prop.name, prop.major, prop.minor);
      return 2;
    }
    const int blocks = prop.multiProcessorCount * 8;  // 8 blocks of 8 warps per SM, queued
    float* out = nullptr;
    CUDA_CHECK(cudaMalloc(&out, kThreads * sizeof(float)));
    const double threads = double(blocks) * kThreads, ops = threads * kIters * kChains;
    struct Probe { const char* name; const char* unit; double per_op; ft::Timing t; };
    std::vector<Probe> probes = {
        {"mma_sync_m16n8k16_bf16", "TFLOP/s", 2.0 * 16 * 8 * 16 / 32, {}},  // per thread
        {"mufu_ex2_f32", "T/s", 1.0, {}},
        {"ffma_f32", "TFLOP/s", 2.0, {}}};
    probes[0].t = ft::time_on_gpu([&](cudaStream_t s) { mma_probe<<<blocks, kThreads, 0, s>>>(out, 7); }, 1, 5, false);
    probes[1].t = ft::time_on_gpu([&](cudaStream_t s) { ex2_probe<<<blocks, kThreads, 0, s>>>(out, 0.5f); }, 1, 5, false);
    probes[2].t = ft::time_on_gpu([&](cudaStream_t s) { ffma_probe<<<blocks, kThreads, 0, s>>>(out, 0.5f); }, 1, 5, false);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaFree(out));
    FILE* f = csv ? std::fopen(csv, "w") : nullptr;
    if (f) std::fprintf(f, "probe,unit,rate,ms,gpu\n");
    std::printf("%-26s %12s %10s   (%s, %d SMs)\n", "probe", "rate", "ms", prop.name, prop.multiProcessorCount);
    for (const auto& p : probes) {
      const double rate = ops * p.per_op / (p.t.median_ms * 1e-3) / 1e12;
      std::printf("%-26s %8.1f %-7s %8.3f\n", p.name, rate, p.unit, p.t.median_ms);
      if (f) std::fprintf(f, "%s,%s,%.2f,%.4f,%s\n", p.name, p.unit, rate, p.t.median_ms, prop.name);
    }
    if (f) std::fclose(f);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ft_probes: %s\n", e.what());
    return 1;
  }
}
