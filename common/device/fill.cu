/// @file fill.cu
#include "device/fill.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "core/check.cuh"
#include "device/buffer.cuh"
#include "device/launch.cuh"

namespace ft {
namespace {

template <class T>
__global__ void fill_uniform_kernel(T* dst, size_t n, uint64_t stream, float lo, float hi) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float x = lo + (hi - lo) * hash_unit(i, stream);
    if constexpr (std::is_same_v<T, float>) dst[i] = x;
    else if constexpr (std::is_same_v<T, __nv_bfloat16>) dst[i] = __float2bfloat16_rn(x);
    else dst[i] = __float2half_rn(x);
  }
}

template <class T>
void launch_fill(void* dst, size_t n, uint64_t stream, float lo, float hi) {
  if (n == 0) return;
  // Eight blocks of 256 threads a SM: enough writes in flight to fill at the memory's speed.
  const int blocks = 8 * (sm_count() > 0 ? sm_count() : 1);
  fill_uniform_kernel<T><<<blocks, 256>>>(static_cast<T*>(dst), n, stream, lo, hi);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void fill_uniform(DeviceTensor& t, uint64_t stream, float lo, float hi) {
  switch (t.dtype()) {
    case DType::Float32: return launch_fill<float>(t.get(), t.size(), stream, lo, hi);
    case DType::BFloat16: return launch_fill<__nv_bfloat16>(t.get(), t.size(), stream, lo, hi);
    case DType::Float16: return launch_fill<__half>(t.get(), t.size(), stream, lo, hi);
  }
}

}  // namespace ft
