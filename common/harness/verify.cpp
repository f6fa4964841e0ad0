/// @file verify.cpp
#include "harness/verify.hpp"

#include <cmath>
#include <cstdio>

namespace ft {

VerifyResult verify(const char* name, const float* got, const double* ref, size_t n,
                    double tolerance) {
  VerifyResult r;
  double err2 = 0, ref2 = 0;
  for (size_t i = 0; i < n; ++i) {
    const double g = got[i];
    // An infinite reference is exact, not a number to take a relative error of: the lse of
    // a query row that sees no key is −∞ (problem.hpp). It must be matched exactly, and
    // stays out of the sums.
    if (std::isinf(ref[i]) && g == ref[i]) continue;
    if (!std::isfinite(g) || std::isinf(ref[i])) {  // NaN: usually the poison, never written
      if (r.first_bad < 0) r.first_bad = int64_t(i);
      ++r.non_finite;
      continue;
    }
    const double e = g - ref[i];
    err2 += e * e;
    ref2 += ref[i] * ref[i];
    r.max_abs_err = std::fmax(r.max_abs_err, std::fabs(e));
  }
  r.rel_l2 = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  char buf[256];
  if (r.non_finite > 0) {
    std::snprintf(buf, sizeof buf,
                  "%s: %lld of %zu values are NaN/Inf or miss the reference's -inf (first at "
                  "index %lld: unwritten, overflow, or a row that sees no key)",
                  name, (long long)r.non_finite, n, (long long)r.first_bad);
  } else {
    r.ok = r.rel_l2 <= tolerance;
    std::snprintf(buf, sizeof buf, "%s: relative L2 error %.3g (tolerance %.1g), max |error| %.3g%s",
                  name, r.rel_l2, tolerance, r.max_abs_err, r.ok ? "" : ": TOO LARGE");
  }
  r.message = buf;
  return r;
}

VerifyResult worst(const VerifyResult& a, const VerifyResult& b) {
  if (!a.ok && b.ok) return a;
  if (!b.ok && a.ok) return b;
  if (a.non_finite != b.non_finite) return a.non_finite > b.non_finite ? a : b;
  return a.rel_l2 >= b.rel_l2 ? a : b;
}

}  // namespace ft
