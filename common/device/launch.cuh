/// @file launch.cuh
/// @brief What a kernel asks of the GPU before its first launch: an architecture, and more
/// dynamic shared memory than the default 48 KB. Each is checked against the device with a
/// one-line ft::DeviceTooSmall naming the need, so a reader on a smaller GPU learns what is
/// missing instead of meeting a raw CUDA error; and the attributes are set once per kernel
/// and device, not before every (timed) launch.
#pragma once

#include <cstddef>
#include <string>

namespace ft {

/// The current device's compute capability as major·10 + minor: 90 for an H100 or H200, 80
/// for an A100. Asked of the driver once per device.
int device_sm();

/// Throws ft::DeviceTooSmall unless the current device's compute capability (major·10 +
/// minor) is at least `min_sm`, e.g. 80 for the tensor-core chapters' mma.sync and cp.async.
void require_sm(int min_sm, const std::string& who);

/// Throws ft::DeviceTooSmall unless the current GPU's compute capability is exactly `sm`
/// (90 for Hopper): for machine code built for an architecture-specific target such as
/// sm_90a, whose instructions (wgmma, setmaxnreg) no other GPU, older or newer, runs.
void require_arch(int sm, const std::string& who);

/// The most dynamic shared memory one block of the current device may opt in to
/// (cudaDevAttrMaxSharedMemoryPerBlockOptin): 227 KB on an H100 or H200, 163 KB on an A100,
/// 99 KB on the sm_86 and sm_89 GPUs. For a dispatch that picks the fastest kernel that fits.
size_t max_dynamic_smem();

/// The current device's number of SMs (cudaDevAttrMultiProcessorCount): 132 on an H100 SXM
/// or H200, 108 on an A100; 0 when there is no CUDA device. For a grid sized to one wave.
int sm_count();

/// Lets `kernel` (a pointer to a __global__ function) use `bytes` of dynamic shared memory
/// and prefer shared memory to L1 in the SM's carveout. Throws ft::DeviceTooSmall when the
/// device grants a block less (`who` names the kernel in the message). Queries and sets
/// the attributes on the first call for each (kernel, device); later calls cost a lookup.
void allow_dynamic_smem(const void* kernel, size_t bytes, const std::string& who);

template <class Kernel>
void allow_dynamic_smem(Kernel* kernel, size_t bytes, const std::string& who) {
  allow_dynamic_smem(reinterpret_cast<const void*>(kernel), bytes, who);
}

}  // namespace ft
