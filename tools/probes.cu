// The ceilings the tensor-core chapters are measured against, each from a register-only
// probe (no memory traffic, so nothing but the unit itself sets the rate):
//
//   mma.sync.m16n8k16 bf16 → f32   the tensor-core rate every chapter-06+ kernel can reach
//   wgmma m64n128k16 bf16 → f32     Hopper's warpgroup instruction (chapter 09), A from
//                                   registers, B a 16×128 tile in shared memory (sm_90a only)
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
#include "sm90/wgmma.cuh"
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

// Two warpgroups a block, each issuing kWgmmaGroup wgmmas into one accumulator (64 × 128
// floats, 64 registers a thread) a group, as a product's k-steps do, then waiting for them.
// B is one k-step of a 16 × 128 MN-major tile in shared memory, zeros: the tensor cores
// read it each time, as they read K and V in chapter 09. Built for sm_90a; elsewhere empty.
constexpr int kWgmmaN = 128;
constexpr int kWgmmaGroup = 16;
constexpr int kWgmmaIters = 512;
using WgmmaB = ft::sm90::Sw128Tile<ft::sm90::kMmaK, kWgmmaN>;

__global__ void __launch_bounds__(kThreads, 1) wgmma_probe(float* out, uint32_t seed) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __shared__ alignas(ft::sm90::kAtomBytes) __nv_bfloat16 b[WgmmaB::kBytes / sizeof(__nv_bfloat16)];
  for (int i = threadIdx.x; i < WgmmaB::kBytes / 2; i += kThreads) b[i] = __float2bfloat16(0.f);
  ft::sm90::fence_proxy_async();  // the stores above, before the tensor cores read them
  __syncthreads();
  const uint32_t a[4] = {seed, seed * 3, seed * 5, seed * 7};
  const uint64_t desc = ft::sm90::mn_major_descriptor<WgmmaB>(uint32_t(__cvta_generic_to_shared(b)), 0);
  float acc[kWgmmaN / 2] = {};
  for (int it = 0; it < kWgmmaIters; ++it) {
    ft::sm90::fence();
#pragma unroll
    for (int k = 0; k < kWgmmaGroup; ++k) ft::sm90::mma_rs<__nv_bfloat16, kWgmmaN, true>(acc, a, desc, true);
    ft::sm90::commit();
    ft::sm90::wait<0>();
    ft::sm90::fence_registers(acc);
  }
  float s = 0;
#pragma unroll
  for (int i = 0; i < kWgmmaN / 2; ++i) s += acc[i];
  if (s == 1.2345f) out[threadIdx.x] = s;
#else
  (void)out, (void)seed;
#endif
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
    struct Probe { const char* name; const char* unit; double ops; ft::Timing t; };
    // Operations of each whole probe: thread-level ones for the CUDA cores and mma.sync
    // (a warp's m16n8k16 is 2·16·8·16 FLOPs, a 32nd of it a thread), a warpgroup's for wgmma.
    std::vector<Probe> probes = {
        {"mma_sync_m16n8k16_bf16", "TFLOP/s", ops * 2.0 * 16 * 8 * 16 / 32, {}},
        {"mufu_ex2_f32", "T/s", ops, {}},
        {"ffma_f32", "TFLOP/s", ops * 2.0, {}}};
    probes[0].t = ft::time_on_gpu([&](cudaStream_t s) { mma_probe<<<blocks, kThreads, 0, s>>>(out, 7); }, 1, 5, false);
    probes[1].t = ft::time_on_gpu([&](cudaStream_t s) { ex2_probe<<<blocks, kThreads, 0, s>>>(out, 0.5f); }, 1, 5, false);
    probes[2].t = ft::time_on_gpu([&](cudaStream_t s) { ffma_probe<<<blocks, kThreads, 0, s>>>(out, 0.5f); }, 1, 5, false);
    if (prop.major == 9) {  // wgmma: Hopper only (sm_90a machine code)
      const int wg_blocks = prop.multiProcessorCount * 4;  // one block of 2 warpgroups an SM at a time
      const double wgmmas = double(wg_blocks) * (kThreads / ft::sm90::kWarpgroupThreads) * kWgmmaIters * kWgmmaGroup;
      probes.push_back({"wgmma_m64n128k16_bf16", "TFLOP/s", wgmmas * 2.0 * ft::sm90::kMmaM * kWgmmaN * ft::sm90::kMmaK, {}});
      probes.back().t = ft::time_on_gpu([&](cudaStream_t s) { wgmma_probe<<<wg_blocks, kThreads, 0, s>>>(out, 7); }, 1, 5, false);
    }
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaFree(out));
    FILE* f = csv ? std::fopen(csv, "w") : nullptr;
    if (f) std::fprintf(f, "probe,unit,rate,ms,gpu\n");
    std::printf("%-26s %12s %10s   (%s, %d SMs)\n", "probe", "rate", "ms", prop.name, prop.multiProcessorCount);
    for (const auto& p : probes) {
      const double rate = p.ops / (p.t.median_ms * 1e-3) / 1e12;
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
