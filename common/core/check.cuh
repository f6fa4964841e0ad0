/// @file check.cuh
/// @brief Every CUDA call checked, with the file and line of the call in the message.
///
/// `CUDA_CHECK(cudaMalloc(...))` throws ft::CudaError when the call fails;
/// `CUDA_CHECK_LAUNCH()` after a kernel launch catches a bad launch configuration at once
/// (the kernel's own faults surface at the next synchronising call, also checked).
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace ft {

/// A failed CUDA runtime call; what() reads "file:line: expression: error name: text".
class CudaError : public std::runtime_error {
 public:
  CudaError(cudaError_t code, const std::string& what) : std::runtime_error(what), code_(code) {}
  cudaError_t code() const { return code_; }

 private:
  cudaError_t code_;
};

/// A request this program cannot serve (unsupported shape, too large for the GPU, no GPU).
/// Programs print what() on one line and exit with code 2.
class Unsupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The GPU lacks what a kernel needs (shared memory per block, an architecture). Programs
/// exit with code 2, the C API returns -1, and the GPU tests skip with the message.
class DeviceTooSmall : public Unsupported {
 public:
  using Unsupported::Unsupported;
};

inline void check_cuda(cudaError_t code, const char* expr, const char* file, int line) {
  if (code == cudaSuccess) return;
  throw CudaError(code, std::string(file) + ":" + std::to_string(line) + ": " + expr + ": " +
                            cudaGetErrorName(code) + ": " + cudaGetErrorString(code));
}

}  // namespace ft

#define CUDA_CHECK(expr) ::ft::check_cuda((expr), #expr, __FILE__, __LINE__)
#define CUDA_CHECK_LAUNCH() ::ft::check_cuda(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
