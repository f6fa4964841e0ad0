/// @file dtype.hpp
/// @brief The element types a problem's Q, K, V, O (and their gradients) can have, and what
/// each costs in bytes. The log-sum-exp and D are float32 whatever the dtype.
///
/// Chapters 01–05 compute in float32 on the CUDA cores; chapters 06 on read and write bf16
/// or fp16 and accumulate in float32 on the tensor cores. An implementation lists the
/// dtypes it supports (like its head dims), and everything else is refused before a launch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
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

// ---- Host conversions: float32 ↔ the 16-bit storage types ---------------------------------
// Round-to-nearest-even, as the GPU's __float2bfloat16_rn / __float2half_rn do. The tests
// use them to make 16-bit inputs (round on the host, upload the bits) and to read 16-bit
// outputs back; the same-precision baseline (precision.hpp) uses round_to() for every value
// it stores.

/// The bits of a float (memcpy: no aliasing trouble).
inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
/// The float of some bits.
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// float → bfloat16 bits, round to nearest even. bfloat16 is float32's upper half, so this is
/// a rounding of the lower 16 bits; a value past the largest bfloat16 (by half an ulp or
/// more) becomes Inf, as IEEE rounding says. NaN stays NaN (quiet, sign kept), never Inf.
inline uint16_t float_to_bf16_bits(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((u >> 16) | 0x0040u);  // NaN
  const uint32_t lsb = (u >> 16) & 1u;  // ties go to the even upper half
  return uint16_t((u + 0x7FFFu + lsb) >> 16);
}

/// bfloat16 bits → float (exact).
inline float bf16_bits_to_float(uint16_t h) { return bits_float(uint32_t(h) << 16); }

/// float → IEEE half bits, round to nearest even: 65520 and above (the midpoint between the
/// largest half, 65504, and 2^16) become Inf; values below 2^-14 become subnormals (steps of
/// 2^-24), and 2^-25 or less becomes ±0 (2^-25 itself is a tie, and 0 is even). NaN stays a
/// quiet NaN with its sign; ±Inf stays ±Inf.
inline uint16_t float_to_fp16_bits(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return uint16_t(sign | 0x7E00u);   // NaN
  if (a >= 0x477FF000u) return uint16_t(sign | 0x7C00u);  // ≥ 65520 (and Inf): Inf
  // Rounds the integer m / 2^shift to nearest, ties to even.
  auto round_shift = [](uint32_t m, int shift) {
    const uint32_t q = m >> shift, rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    return q + ((rest > half || (rest == half && (q & 1u))) ? 1u : 0u);
  };
  const int e = int(a >> 23);  // biased float exponent
  if (e < 113) {  // below 2^-14: a half subnormal, m·2^(e−150) in units of 2^-24
    if (e < 102) return sign;  // below 2^-25 (incl. float subnormals): ±0
    const uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
    return uint16_t(sign | round_shift(m, 126 - e));  // may round up to 0x0400, 2^-14: right
  }
  // Normal: rebias the exponent (127 → 15) and round 23 mantissa bits to 10; a carry out of
  // the mantissa steps the exponent, which is the right result (65504 + carry is excluded).
  return uint16_t(sign | round_shift(a - (uint32_t(112) << 23), 13));
}

/// IEEE half bits → float (exact: every half is a float).
inline float fp16_bits_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0x1F) return bits_float(sign | 0x7F800000u | (m << 13));  // Inf, NaN
  if (e == 0) {  // ±0 and subnormals: m·2^-24, exact in float
    const float v = float(m) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return bits_float(sign | ((e + 112) << 23) | (m << 13));
}

/// float → the 16 bits of a 16-bit dtype (BFloat16 or Float16; Float32 is not 16 bits).
inline uint16_t to_bits(DType t, float f) {
  return t == DType::Float16 ? float_to_fp16_bits(f) : float_to_bf16_bits(f);
}
/// The 16 bits of a BFloat16 or Float16 value → float.
inline float from_bits(DType t, uint16_t h) {
  return t == DType::Float16 ? fp16_bits_to_float(h) : bf16_bits_to_float(h);
}

/// `f` rounded to the nearest value of dtype `t` (ties to even), as a float: what storing it
/// in a tensor of that dtype and reading it back gives. The identity for Float32.
inline float round_to(DType t, float f) {
  return t == DType::Float32 ? f : from_bits(t, to_bits(t, f));
}

/// The unit roundoff of dtype `t`: half the spacing of its values just above 1, the largest
/// relative error one rounding to it can make (2^-24 float32, 2^-8 bf16, 2^-11 fp16).
constexpr double unit_roundoff(DType t) {
  return t == DType::Float32 ? 0x1p-24 : t == DType::BFloat16 ? 0x1p-8 : 0x1p-11;
}

}  // namespace ft
