/// @file verify.hpp
/// @brief Verification (contract 2 in docs/contracts.md): fails, never only prints, on any
/// NaN or Inf, on any element never written (outputs are poisoned with NaN first), and on
/// relative L2 error above the tolerance.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/dtype.hpp"

namespace ft {

/// Tolerance of relative L2 error for float32 kernels (contract 2).
constexpr double kFloat32Tolerance = 1e-4;
/// ... for bf16 and fp16 kernels: their inputs and outputs carry 8 and 11 significant bits
/// (relative rounding 2^-9 ≈ 2e-3 and 2^-12 ≈ 2.4e-4 per element), so 1e-2 leaves room for
/// the rounding of P before P·V while still failing on any real error.
constexpr double kHalfTolerance = 1e-2;

/// The fixed tolerance of a dtype: kFloat32Tolerance or kHalfTolerance.
constexpr double fixed_tolerance(DType t) {
  return t == DType::Float32 ? kFloat32Tolerance : kHalfTolerance;
}

struct VerifyResult {
  bool ok = false;
  double rel_l2 = 0;          ///< ‖got − ref‖₂ / ‖ref‖₂ (‖got − ref‖₂ when ‖ref‖₂ = 0)
  double max_abs_err = 0;
  int64_t non_finite = 0;     ///< NaN or Inf in `got`: includes every unwritten element
  int64_t first_bad = -1;     ///< index of the first non-finite element, or -1
  std::string message;        ///< one line: what failed (or the error figures when ok)
};

/// Compares n values. `name` labels the message ("O", "dK", …). A reference of ±∞ (the lse
/// of a query row that sees no key is −∞) must be matched exactly and counts in no sum; any
/// other non-finite value fails.
VerifyResult verify(const char* name, const float* got, const double* ref, size_t n,
                    double tolerance);

/// Relative L2 error over several tensors at once isn't what the contract asks; callers
/// take the worst of the per-tensor results with this.
VerifyResult worst(const VerifyResult& a, const VerifyResult& b);

}  // namespace ft
