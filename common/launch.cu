/// @file launch.cu
#include "launch.cuh"

#include <map>
#include <mutex>
#include <utility>

#include "check.cuh"

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

void require_sm(int min_sm, const std::string& who) {
  if (min_sm <= 0) return;
  // Asked once per device (this runs before every launch, inside the timed region).
  static std::mutex mutex;
  static std::map<int, int> sm_of_device;
  const int device = current_device();
  int sm = 0;
  {
    const std::lock_guard<std::mutex> lock(mutex);
    auto it = sm_of_device.find(device);
    if (it == sm_of_device.end()) {
      int major = 0, minor = 0;
      CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
      CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
      it = sm_of_device.emplace(device, major * 10 + minor).first;
    }
    sm = it->second;
  }
  if (sm < min_sm) {
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    throw DeviceTooSmall(who + " needs a GPU of compute capability " + std::to_string(min_sm / 10) +
                         "." + std::to_string(min_sm % 10) + " (sm_" + std::to_string(min_sm) +
                         ") or newer; " + prop.name + " is sm_" + std::to_string(sm));
  }
}

size_t max_dynamic_smem() {
  // Asked once per device, as require_sm's answer (a dispatch calls this before each launch).
  static std::mutex mutex;
  static std::map<int, size_t> optin_of_device;
  const int device = current_device();
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = optin_of_device.find(device);
  if (it == optin_of_device.end()) {
    int optin = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    it = optin_of_device.emplace(device, size_t(optin)).first;
  }
  return it->second;
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
