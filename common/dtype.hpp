/// @file dtype.hpp
/// @brief The element types a problem's Q, K, V, O (and their gradients) can have, and what
/// each costs in bytes. The log-sum-exp and D are float32 whatever the dtype.
///
/// Chapters 01–05 compute in float32 on the CUDA cores; chapters 06 on read and write bf16
/// or fp16 and accumulate in float32 on the tensor cores. An implementation lists the
/// dtypes it supports (like its head dims), and everything else is refused before a launch.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ft {

/// Storage type of the tensors. The numeric values are the C API's `FT_DTYPE_*` (flashtut.h).
enum class DType : int {
  Float32 = 0,  ///< IEEE single: 8 exponent bits, 24 significant bits
  BFloat16 = 1, ///< bfloat16: float32's 8 exponent bits, 8 significant bits (same range)
  Float16 = 2,  ///< IEEE half: 5 exponent bits, 11 significant bits (max 65504)
};

/// Bytes of one element.
constexpr size_t dtype_bytes(DType t) { return t == DType::Float32 ? 4 : 2; }

/// "float32", "bf16", "fp16": the names the command line and the CSVs use.
inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::Float32: return "float32";
    case DType::BFloat16: return "bf16";
    case DType::Float16: return "fp16";
  }
  return "?";
}

/// Parses a name from dtype_name(); false if it is none of them.
inline bool parse_dtype(const std::string& name, DType* out) {
  for (DType t : {DType::Float32, DType::BFloat16, DType::Float16})
    if (name == dtype_name(t)) {
      *out = t;
      return true;
    }
  return false;
}

/// "float32, bf16": a list for messages.
inline std::string dtype_list(const std::vector<DType>& types) {
  std::string s;
  for (DType t : types) s += (s.empty() ? "" : ", ") + std::string(dtype_name(t));
  return s;
}

}  // namespace ft
