/// @file buffer.cuh
/// @brief RAII device buffers: memory is freed when the owner goes out of scope, even when
/// an exception (a failed check) unwinds the stack.
#pragma once

#include <cstddef>
#include <vector>

#include "core/check.cuh"
#include "core/dtype.hpp"

namespace ft {

/// An array of `T` in device memory. Move-only: one owner frees it exactly once.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t count) : count_(count) {
    if (count_ > 0) CUDA_CHECK(cudaMalloc(&ptr_, count_ * sizeof(T)));
  }
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);  // never throw from a destructor
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), count_(o.count_) {
    o.ptr_ = nullptr;
    o.count_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      if (ptr_) cudaFree(ptr_);
      ptr_ = o.ptr_;
      count_ = o.count_;
      o.ptr_ = nullptr;
      o.count_ = 0;
    }
    return *this;
  }

  T* get() const { return ptr_; }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }

  void upload(const std::vector<T>& host) {
    if (host.size() != count_) throw std::invalid_argument("DeviceBuffer::upload: size mismatch");
    if (count_) CUDA_CHECK(cudaMemcpy(ptr_, host.data(), bytes(), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    if (count_) CUDA_CHECK(cudaMemcpy(host.data(), ptr_, bytes(), cudaMemcpyDeviceToHost));
    return host;
  }
  /// Fills every byte with 0xFF: as float32 that is a NaN, so an element a kernel forgets
  /// to write fails verification instead of passing with a leftover value.
  void poison(cudaStream_t stream = 0) {
    if (count_) CUDA_CHECK(cudaMemsetAsync(ptr_, 0xFF, bytes(), stream));
  }

 private:
  T* ptr_ = nullptr;
  size_t count_ = 0;
};

/// A tensor of a problem's dtype in device memory, seen from the host as floats: upload()
/// rounds each float to the dtype (ties to even) and download() widens back, exactly. For
/// float32 it is a plain copy. poison() fills it with NaN in any dtype (0xFFFF is a NaN in
/// bf16 and fp16 too).
class DeviceTensor {
 public:
  DeviceTensor(DType dtype, size_t count) : dtype_(dtype), count_(count), bytes_(count * dtype_bytes(dtype)) {}

  void* get() const { return bytes_.get(); }
  size_t size() const { return count_; }
  DType dtype() const { return dtype_; }

  void upload(const std::vector<float>& host) {
    if (host.size() != count_) throw std::invalid_argument("DeviceTensor::upload: size mismatch");
    if (dtype_ == DType::Float32) return copy_in(host.data());
    std::vector<uint16_t> bits(count_);
    for (size_t i = 0; i < count_; ++i) bits[i] = to_bits(dtype_, host[i]);
    copy_in(bits.data());
  }
  std::vector<float> download() const {
    std::vector<float> host(count_);
    if (dtype_ == DType::Float32) {
      copy_out(host.data());
      return host;
    }
    std::vector<uint16_t> bits(count_);
    copy_out(bits.data());
    for (size_t i = 0; i < count_; ++i) host[i] = from_bits(dtype_, bits[i]);
    return host;
  }
  void poison(cudaStream_t stream = 0) { bytes_.poison(stream); }

 private:
  void copy_in(const void* src) {
    if (count_) CUDA_CHECK(cudaMemcpy(get(), src, bytes_.bytes(), cudaMemcpyHostToDevice));
  }
  void copy_out(void* dst) const {
    if (count_) CUDA_CHECK(cudaMemcpy(dst, get(), bytes_.bytes(), cudaMemcpyDeviceToHost));
  }
  DType dtype_;
  size_t count_;
  DeviceBuffer<unsigned char> bytes_;
};

}  // namespace ft
