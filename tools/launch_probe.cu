// What a step of chapter 11's decode pays besides its bytes, measured on empty kernels so that
// nothing but the launches and the barrier sets the time. Each row is timed as the chapter
// times a step (ft::time_on_gpu: L2 flushed before each run, CUDA events around it, the median):
//
//   one_kernel        one grid of SMs blocks of 128 threads, plainly launched
//   two_kernels       the same, then a second grid of as many blocks: decode, then decode_merge
//   cooperative       one grid launched cooperatively (cudaLaunchAttributeCooperative), no barrier
//   cooperative_sync  the same, its blocks meeting once at cooperative_groups' grid.sync()
//
//   ./build/tools/ft_launch_probe [--csv launch.csv]
//
// two_kernels − one_kernel is what a second kernel adds to a step; cooperative − one_kernel what
// the cooperative launch adds; cooperative_sync − cooperative what one barrier across the grid
// costs. Step 6 at B = 1 trades the first for the other two (decode_grid_merge.cuh).
#include <cooperative_groups.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "core/check.cuh"
#include "device/timer.cuh"

namespace {

constexpr int kThreads = 128;  // one warpgroup, as step 6's decode at B = 1
constexpr int kIters = 200;    // timed runs a row: the median of many short ones
constexpr int kWarmup = 20;

template <bool kSync>
__global__ void __launch_bounds__(kThreads) empty_grid(int* out) {
  if constexpr (kSync) cooperative_groups::this_grid().sync();
  if (threadIdx.x == 0 && blockIdx.x == 1u << 30) *out = 1;  // never true; a kernel with a body
}

void launch(void (*kernel)(int*), int blocks, int* out, cudaStream_t stream, bool cooperative) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeCooperative;
  attribute.val.cooperative = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(unsigned(blocks));
  config.blockDim = dim3(kThreads);
  config.stream = stream;
  config.attrs = cooperative ? &attribute : nullptr;
  config.numAttrs = cooperative ? 1 : 0;
  CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, out));
}

}  // namespace

int main(int argc, char** argv) {
  const char* csv = argc == 3 && std::strcmp(argv[1], "--csv") == 0 ? argv[2] : nullptr;
  if (argc != 1 && !csv) {
    std::fprintf(stderr, "usage: ft_launch_probe [--csv FILE]\n");
    return 2;
  }
  try {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    if (!prop.cooperativeLaunch) {
      std::fprintf(stderr, "ft_launch_probe: %s cannot launch cooperatively\n", prop.name);
      return 2;
    }
    const int blocks = prop.multiProcessorCount;  // one wave, as step 6's grid at B = 1
    int* out = nullptr;
    CUDA_CHECK(cudaMalloc(&out, sizeof(int)));
    struct Row { const char* name; ft::Timing t; };
    const auto time = [&](auto fn) { return ft::time_on_gpu(fn, kWarmup, kIters, true); };
    std::vector<Row> rows = {
        {"one_kernel", time([&](cudaStream_t s) { launch(empty_grid<false>, blocks, out, s, false); })},
        {"two_kernels", time([&](cudaStream_t s) {
           launch(empty_grid<false>, blocks, out, s, false);
           launch(empty_grid<false>, blocks, out, s, false);
         })},
        {"cooperative", time([&](cudaStream_t s) { launch(empty_grid<false>, blocks, out, s, true); })},
        {"cooperative_sync", time([&](cudaStream_t s) { launch(empty_grid<true>, blocks, out, s, true); })}};
    CUDA_CHECK(cudaFree(out));
    FILE* f = csv ? std::fopen(csv, "w") : nullptr;
    if (csv && !f) {
      std::fprintf(stderr, "ft_launch_probe: cannot write %s\n", csv);
      return 1;
    }
    if (f) std::fprintf(f, "launch,blocks,threads,median_us,min_us,max_us,gpu\n");
    std::printf("%-18s %10s %10s %10s   (%s, %d blocks of %d threads)\n", "launch", "median_us", "min_us", "max_us",
                prop.name, blocks, kThreads);
    for (const auto& r : rows) {
      std::printf("%-18s %10.2f %10.2f %10.2f\n", r.name, r.t.median_ms * 1e3, r.t.min_ms * 1e3, r.t.max_ms * 1e3);
      if (f)
        std::fprintf(f, "%s,%d,%d,%.3f,%.3f,%.3f,%s\n", r.name, blocks, kThreads, r.t.median_ms * 1e3,
                     r.t.min_ms * 1e3, r.t.max_ms * 1e3, prop.name);
    }
    if (f) std::fclose(f);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ft_launch_probe: %s\n", e.what());
    return 1;
  }
}
