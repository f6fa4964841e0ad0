/// @file verify.hpp
/// @brief Verification (contract 2 in docs/contracts.md): fails, never only prints, on any
/// NaN or Inf, on any element never written (outputs are poisoned with NaN first), and on
/// relative L2 error above the tolerance.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ft {

/// Tolerance of relative L2 error for float32 kernels (contract 2).
constexpr double kFloat32Tolerance = 1e-4;

struct VerifyResult {
  bool ok = false;
  double rel_l2 = 0;          ///< ‖got − ref‖₂ / ‖ref‖₂ (‖got − ref‖₂ when ‖ref‖₂ = 0)
  double max_abs_err = 0;
  int64_t non_finite = 0;     ///< NaN or Inf in `got`: includes every unwritten element
  int64_t first_bad = -1;     ///< index of the first non-finite element, or -1
  std::string message;        ///< one line: what failed (or the error figures when ok)
};

/// Compares n values. `name` labels the message ("O", "dK", …).
VerifyResult verify(const char* name, const float* got, const double* ref, size_t n,
                    double tolerance);

/// Relative L2 error over several tensors at once isn't what the contract asks; callers
/// take the worst of the per-tensor results with this.
VerifyResult worst(const VerifyResult& a, const VerifyResult& b);

}  // namespace ft
