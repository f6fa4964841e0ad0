/// @file launch.cu
#include "device/launch.cuh"

#include <map>
#include <mutex>
#include <utility>

#include "core/check.cuh"

namespace ft {

namespace {
int current_device() {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

std::string kb(size_t bytes) {
  char s[32];
  std::snprintf(s, sizeof s, "%.1f KB", double(bytes) / 1024);
  return s;
}
}  // namespace

/// A device attribute of the current device, asked of the driver once per (device,
/// attribute): the callers run before every launch, inside the timed region.
static int device_attribute(cudaDeviceAttr attr, int device) {
  static std::mutex mutex;
  static std::map<std::pair<int, int>, int> known;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = known.find({device, int(attr)});
  if (it == known.end()) {
    int value = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&value, attr, device));
    it = known.emplace(std::pair{device, int(attr)}, value).first;
  }
  return it->second;
}

int device_sm() {
  const int device = current_device();
  return device_attribute(cudaDevAttrComputeCapabilityMajor, device) * 10 +
         device_attribute(cudaDevAttrComputeCapabilityMinor, device);
}

void require_sm(int min_sm, const std::string& who) {
  if (min_sm <= 0) return;
  const int sm = device_sm();
  if (sm < min_sm) {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, current_device()));
    throw DeviceTooSmall(who + " needs a GPU of compute capability " + std::to_string(min_sm / 10) +
                         "." + std::to_string(min_sm % 10) + " (sm_" + std::to_string(min_sm) +
                         ") or newer; " + prop.name + " is sm_" + std::to_string(sm));
  }
}

void require_arch(int sm, const std::string& who) {
  const int have = device_sm();
  if (have != sm) {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, current_device()));
    throw DeviceTooSmall(who + " needs " + (sm == 90 ? "Hopper " : "") + "(sm_" + std::to_string(sm) +
                         "): its kernels are sm_" + std::to_string(sm) + "a machine code; " + prop.name +
                         " is sm_" + std::to_string(have));
  }
}

size_t max_dynamic_smem() {
  return size_t(device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, current_device()));
}

int sm_count() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    (void)cudaGetLastError();  // no device is an answer here, not an error to keep
    return 0;
  }
  return device_attribute(cudaDevAttrMultiProcessorCount, current_device());
}

void allow_dynamic_smem(const void* kernel, size_t bytes, const std::string& who) {
  // Which (kernel, device) pairs have their attribute set, to how many bytes.
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, size_t> granted;
  const int device = current_device();
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = granted.find({kernel, device});
  if (it != granted.end() && it->second >= bytes) return;

  const size_t optin = max_dynamic_smem();
  if (bytes > optin) {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    throw DeviceTooSmall(who + " needs " + kb(bytes) + " of shared memory per block; " +
                         prop.name + " grants " + kb(optin) +
                         " (choose a smaller head_dim or tile, see the chapter README)");
  }
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
  // All of the SM's L1/shared storage as shared memory: these kernels keep their reuse in
  // shared memory and do not re-read global memory through L1.
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                  int(cudaSharedmemCarveoutMaxShared)));
  granted[{kernel, device}] = bytes;
}

}  // namespace ft
