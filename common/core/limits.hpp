/// @file limits.hpp
/// @brief The hardware limits the kernels' traits check at compile time.
#pragma once

#include <cstddef>

namespace ft {

/// The most shared memory one block can opt in to on the GPUs the tutorial targets: 227 KB
/// on sm_90 (H100, H200; 228 KB an SM, 1 KB of it the system's). A traits struct that needs
/// more could run nowhere; one that needs less than this but more than a smaller GPU grants
/// (sm_80: 163 KB, sm_86/89: 99 KB) is refused at launch, on that GPU, by allow_dynamic_smem
/// (device/launch.cuh), with a message.
constexpr size_t kMaxSmemPerBlock = 227 * 1024;

}  // namespace ft
