// CPU tests of the host dtype conversions (dtype.hpp) and of the same-precision baseline
// (precision.hpp), and the large-logit experiment: float32 emulations of chapter 05's two
// backward algorithms, measured against the float64 reference next to the float32 unfused
// baseline. `ctest --test-dir build -R LargeLogits -V` prints its tables.
#include <gtest/gtest.h>
#include <unistd.h>  // getpid

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "reference/inputs.hpp"
#include "cuda_core/online_softmax.cuh"
#include "reference/precision.hpp"
#include "reference/reference.hpp"

namespace {

using ft::DType;
using ft::Problem;

// ---- Conversions ---------------------------------------------------------------------------

float bits_to_float(uint32_t u) { return ft::bits_float(u); }

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(ft::float_to_bf16_bits(1.0f), 0x3F80);
  EXPECT_EQ(ft::float_to_bf16_bits(-2.0f), 0xC000);
  EXPECT_EQ(ft::float_to_bf16_bits(0.0f), 0x0000);
  EXPECT_EQ(ft::float_to_bf16_bits(-0.0f), 0x8000);
  // 1 + 2^-8 is the midpoint of 1 and 1 + 2^-7: ties to the even one, 1.
  EXPECT_EQ(ft::float_to_bf16_bits(1.0f + 0x1p-8f), 0x3F80);
  // 1 + 3·2^-8 is the midpoint of 1 + 2^-7 (odd) and 1 + 2^-6 (even): up.
  EXPECT_EQ(ft::float_to_bf16_bits(1.0f + 3 * 0x1p-8f), 0x3F82);
  // Just above a midpoint rounds up; just below, down.
  EXPECT_EQ(ft::float_to_bf16_bits(bits_to_float(0x3F808001)), 0x3F81);
  EXPECT_EQ(ft::float_to_bf16_bits(bits_to_float(0x3F807FFF)), 0x3F80);
  // π = 0x40490FDB → 0x4049 (the dropped half 0x0FDB is below the midpoint).
  EXPECT_EQ(ft::float_to_bf16_bits(3.14159265f), 0x4049);
}

TEST(Bf16, InfNanOverflowAndTinyValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(ft::float_to_bf16_bits(inf), 0x7F80);
  EXPECT_EQ(ft::float_to_bf16_bits(-inf), 0xFF80);
  const uint16_t nan = ft::float_to_bf16_bits(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(std::isnan(ft::bf16_bits_to_float(nan)));
  // A signalling NaN whose payload lives only in the low 16 bits must not become Inf.
  EXPECT_TRUE(std::isnan(ft::bf16_bits_to_float(ft::float_to_bf16_bits(bits_to_float(0x7F800001)))));
  // The largest float rounds past the largest bf16 (0x7F7F): Inf, as IEEE rounding says.
  EXPECT_EQ(ft::float_to_bf16_bits(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(ft::float_to_bf16_bits(bits_to_float(0x7F7F0000)), 0x7F7F);
  // bf16 keeps float32's subnormals (its exponent range): the smallest float subnormal
  // 2^-149 is below half of the smallest bf16 subnormal 2^-133, so it becomes 0.
  EXPECT_EQ(ft::float_to_bf16_bits(0x1p-133f), 0x0001);
  EXPECT_EQ(ft::float_to_bf16_bits(0x1p-149f), 0x0000);
  EXPECT_EQ(ft::bf16_bits_to_float(0x0001), 0x1p-133f);
}

TEST(Bf16, BitsRoundTripExactly) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = ft::bf16_bits_to_float(uint16_t(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(ft::float_to_bf16_bits(f), h) << std::hex << h;
  }
}

TEST(Fp16, RoundsToNearestEven) {
  EXPECT_EQ(ft::float_to_fp16_bits(1.0f), 0x3C00);
  EXPECT_EQ(ft::float_to_fp16_bits(-2.0f), 0xC000);
  EXPECT_EQ(ft::float_to_fp16_bits(0.5f), 0x3800);
  EXPECT_EQ(ft::float_to_fp16_bits(-0.0f), 0x8000);
  // 1 + 2^-11: the midpoint of 1 and 1 + 2^-10, ties to 1; 1 + 3·2^-11 ties up to 1 + 2^-9.
  EXPECT_EQ(ft::float_to_fp16_bits(1.0f + 0x1p-11f), 0x3C00);
  EXPECT_EQ(ft::float_to_fp16_bits(1.0f + 3 * 0x1p-11f), 0x3C02);
  // 1 + 2^-8 is a half exactly (bits 0x3C04).
  EXPECT_EQ(ft::float_to_fp16_bits(1.0f + 0x1p-8f), 0x3C04);
  EXPECT_EQ(ft::float_to_fp16_bits(3.14159265f), 0x4248);
}

TEST(Fp16, OverflowToInfAt65520) {
  EXPECT_EQ(ft::float_to_fp16_bits(65504.f), 0x7BFF);  // the largest half
  EXPECT_EQ(ft::float_to_fp16_bits(65519.f), 0x7BFF);  // below the midpoint: down
  EXPECT_EQ(ft::float_to_fp16_bits(65520.f), 0x7C00);  // the midpoint: to even, which is Inf
  EXPECT_EQ(ft::float_to_fp16_bits(-70000.f), 0xFC00);
  EXPECT_EQ(ft::float_to_fp16_bits(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_TRUE(std::isnan(ft::fp16_bits_to_float(
      ft::float_to_fp16_bits(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(ft::fp16_bits_to_float(0x7BFF), 65504.f);
  EXPECT_TRUE(std::isinf(ft::fp16_bits_to_float(0x7C00)));
}

TEST(Fp16, Subnormals) {
  EXPECT_EQ(ft::float_to_fp16_bits(0x1p-14f), 0x0400);   // smallest normal
  EXPECT_EQ(ft::float_to_fp16_bits(0x1p-24f), 0x0001);   // smallest subnormal
  EXPECT_EQ(ft::float_to_fp16_bits(-0x1p-24f), 0x8001);
  EXPECT_EQ(ft::float_to_fp16_bits(0x1p-25f), 0x0000);   // a tie between 0 and 2^-24: 0
  EXPECT_EQ(ft::float_to_fp16_bits(0x1.000002p-25f), 0x0001);  // just above it: 2^-24
  EXPECT_EQ(ft::float_to_fp16_bits(3 * 0x1p-25f), 0x0002);     // 1.5·2^-24: tie to even 2
  EXPECT_EQ(ft::float_to_fp16_bits(0x1p-30f), 0x0000);
  EXPECT_EQ(ft::float_to_fp16_bits(0x1p-149f), 0x0000);   // a float subnormal
  EXPECT_EQ(ft::float_to_fp16_bits(1023 * 0x1p-24f), 0x03FF);  // largest subnormal
  // Between the largest subnormal and the smallest normal, rounding up crosses into normals.
  EXPECT_EQ(ft::float_to_fp16_bits(1023.5f * 0x1p-24f), 0x0400);
  EXPECT_EQ(ft::fp16_bits_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(ft::fp16_bits_to_float(0x83FF), -1023 * 0x1p-24f);
}

TEST(Fp16, BitsRoundTripExactly) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = ft::fp16_bits_to_float(uint16_t(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(ft::float_to_fp16_bits(f), h) << std::hex << h;
  }
}

// Against the hardware-independent definition: the nearest of the two neighbours, ties to
// the one with an even last bit, for many random floats across the whole range.
TEST(Conversions, NearestNeighbourOnRandomValues) {
  const std::vector<float> u = ft::random_uniform(200000, 5);
  for (DType t : {DType::BFloat16, DType::Float16}) {
    for (size_t i = 0; i < u.size(); ++i) {
      const float x = std::ldexp(u[i], int(i % 40) - 30);  // magnitudes 2^-30 .. 2^10
      const float r = ft::round_to(t, x);
      // Neighbours of r in the dtype: one step down and up in its bits (same sign).
      const uint16_t b = ft::to_bits(t, r);
      const float lo = ft::from_bits(t, uint16_t(b - ((b & 0x7FFF) ? 1 : 0)));
      const float hi = ft::from_bits(t, uint16_t(b + 1));
      const double err = std::fabs(double(x) - r);
      ASSERT_LE(err, std::fabs(double(x) - lo)) << ft::dtype_name(t) << " x=" << x;
      if (std::isfinite(hi)) {
        ASSERT_LE(err, std::fabs(double(x) - hi)) << ft::dtype_name(t) << " x=" << x;
      }
      ASSERT_LE(err, std::fabs(x) * ft::unit_roundoff(t) + 0x1p-24) << ft::dtype_name(t);
    }
  }
  EXPECT_EQ(ft::round_to(DType::Float32, 1.0f + 0x1p-20f), 1.0f + 0x1p-20f);
  EXPECT_EQ(ft::round_to(DType::BFloat16, 1.0f + 0x1p-20f), 1.0f);
}

// ---- The same-precision baseline -------------------------------------------------------------

Problem shape(int N, int d, bool causal, DType t = DType::Float32) {
  return ft::make_problem(2, 3, N, d, causal, t);
}

ft::ReferenceTensors reference(const Problem& p, const ft::AttentionInputs& in, bool backward) {
  ft::ReferenceTensors r;
  r.O.resize(size_t(p.elems()));
  r.lse.resize(size_t(p.rows()));
  ft::reference_forward(p, in.Q.data(), in.K.data(), in.V.data(), r.O.data(), r.lse.data());
  if (backward) {
    for (auto* x : {&r.dQ, &r.dK, &r.dV}) x->resize(size_t(p.elems()));
    ft::reference_backward(p, in.Q.data(), in.K.data(), in.V.data(), in.dO.data(), r.dQ.data(),
                           r.dK.data(), r.dV.data());
  }
  return r;
}

ft::AttentionInputs inputs(const Problem& p, ft::InputKind kind, uint64_t seed) {
  ft::AttentionInputs in = ft::make_inputs(p, kind, seed);
  ft::round_inputs(p.dtype, in);
  return in;
}

TEST(UnfusedBaseline, SingleKeyIsExact) {
  // N = 1: P = 1, O = V, and the gradients of Q and K vanish (dS = 1·(dP − D) = 0).
  const Problem p = shape(1, 16, false);
  const auto in = inputs(p, ft::InputKind::Uniform, 3);
  std::vector<float> O(16), lse(1), dQ(16), dK(16), dV(16);
  ft::unfused_backward_head(p, in.Q.data(), in.K.data(), in.V.data(), in.dO.data(), 0, O.data(),
                            lse.data(), dQ.data(), dK.data(), dV.data());
  for (int c = 0; c < 16; ++c) {
    EXPECT_EQ(O[c], in.V[c]);
    EXPECT_EQ(dV[c], in.dO[c]);
    EXPECT_EQ(dQ[c], 0.f);
    EXPECT_EQ(dK[c], 0.f);
  }
}

TEST(UnfusedBaseline, BackwardRunsTheSameForward) {
  const Problem p = shape(37, 32, true);
  const auto in = inputs(p, ft::InputKind::Uniform, 4);
  const size_t nd = 37 * 32;
  std::vector<float> O(nd), lse(37), O2(nd), lse2(37), dQ(nd), dK(nd), dV(nd);
  ft::unfused_forward_head(p, in.Q.data(), in.K.data(), in.V.data(), 4, O.data(), lse.data());
  ft::unfused_backward_head(p, in.Q.data(), in.K.data(), in.V.data(), in.dO.data(), 4, O2.data(),
                            lse2.data(), dQ.data(), dK.data(), dV.data());
  EXPECT_EQ(O, O2);
  EXPECT_EQ(lse, lse2);
}

// stored_o_error against an independent computation: the whole float64 backward of each
// head with D_i formed from the rounded O (dS is linear in D, so the two must agree to
// float64 rounding), on large logits where the term is large, causal and not.
std::vector<double> grads_with_rounded_o(const Problem& p, const ft::AttentionInputs& in,
                                         const ft::ReferenceTensors& r, bool want_dk) {
  const int N = p.len_q, d = p.head_dim;
  const double scale = p.softmax_scale();
  std::vector<double> out(size_t(p.elems()), 0.0);
  for (int64_t h = 0; h < p.heads_total(); ++h) {
    const int64_t at = h * N * d;
    for (int i = 0; i < N; ++i) {
      double D = 0;
      for (int c = 0; c < d; ++c)
        D += double(in.dO[at + i * d + c]) * ft::round_to(p.dtype, float(r.O[at + i * d + c]));
      for (int j = 0; j < (p.causal ? i + 1 : N); ++j) {
        double s = 0, dp = 0;
        for (int c = 0; c < d; ++c) {
          s += double(in.Q[at + i * d + c]) * in.K[at + j * d + c];
          dp += double(in.dO[at + i * d + c]) * in.V[at + j * d + c];
        }
        const double ds = std::exp(scale * s - r.lse[h * N + i]) * (dp - D);
        for (int c = 0; c < d; ++c) {
          if (want_dk) out[at + j * d + c] += scale * ds * in.Q[at + i * d + c];
          else out[at + i * d + c] += scale * ds * in.K[at + j * d + c];
        }
      }
    }
  }
  return out;
}

double rel_l2(const std::vector<double>& got, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i)
    num += (got[i] - ref[i]) * (got[i] - ref[i]), den += ref[i] * ref[i];
  return std::sqrt(num / den);
}

TEST(StoredOError, MatchesTheBackwardWithDFromTheRoundedO) {
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "non-causal");
    const Problem p = shape(33, 16, causal, DType::BFloat16);
    const auto in = inputs(p, ft::InputKind::LargeScores, 11);
    const auto r = reference(p, in, true);
    const ft::StoredOError e = ft::stored_o_error(p, in, r);
    const double dq = rel_l2(grads_with_rounded_o(p, in, r, false), r.dQ);
    const double dk = rel_l2(grads_with_rounded_o(p, in, r, true), r.dK);
    EXPECT_GT(e.dQ, 1e-4);  // large logits: O's rounding is a visible part of dS
    EXPECT_NEAR(e.dQ, dq, 1e-6 * dq + 1e-12);
    EXPECT_NEAR(e.dK, dk, 1e-6 * dk + 1e-12);
  }
  const Problem f32 = shape(33, 16, false);
  const auto in = inputs(f32, ft::InputKind::LargeScores, 11);
  const ft::StoredOError none = ft::stored_o_error(f32, in, reference(f32, in, true));
  EXPECT_EQ(none.dQ, 0.0);
  EXPECT_EQ(none.dK, 0.0);
}

// float32: errors of a few float32 roundings; 16-bit: of the order of the dtype's unit
// roundoff, and every stored output representable in the dtype.
TEST(UnfusedBaseline, ErrorMatchesItsPrecision) {
  for (DType t : {DType::Float32, DType::BFloat16, DType::Float16}) {
    SCOPED_TRACE(ft::dtype_name(t));
    const Problem p = shape(100, 32, true, t);
    const auto in = inputs(p, ft::InputKind::Uniform, 9);
    const ft::TensorErrors e = ft::unfused_backward_error(p, in, reference(p, in, true));
    const double u = ft::unit_roundoff(t);
    for (double err : {e.O, e.dQ, e.dK, e.dV}) {
      EXPECT_GT(err, 0.02 * u);
      EXPECT_LT(err, 4 * u + 64 * ft::unit_roundoff(DType::Float32));
    }
    // lse is float32, but it is formed from S as stored: S's rounding to the dtype shows,
    // scaled down by |S| / |lse| (scores of a few tenths against lse ≈ log N).
    EXPECT_GT(e.lse, 0.0);
    EXPECT_LT(e.lse, u + 16 * ft::unit_roundoff(DType::Float32));
    const ft::TensorErrors f = ft::unfused_forward_error(p, in, reference(p, in, false));
    EXPECT_EQ(f.O, e.O);
    EXPECT_EQ(f.lse, e.lse);
  }
  const Problem p = shape(50, 32, false, DType::BFloat16);
  const auto in = inputs(p, ft::InputKind::Uniform, 10);
  std::vector<float> O(50 * 32), lse(50), dQ(50 * 32), dK(50 * 32), dV(50 * 32);
  ft::unfused_backward_head(p, in.Q.data(), in.K.data(), in.V.data(), in.dO.data(), 1, O.data(),
                            lse.data(), dQ.data(), dK.data(), dV.data());
  for (const auto* x : {&O, &dQ, &dK, &dV})
    for (float f : *x) ASSERT_EQ(ft::round_to(DType::BFloat16, f), f);
}

TEST(UnfusedBaseline, RelativeL2) {
  const std::vector<float> got = {1.f, 2.f, 2.f};
  const std::vector<double> ref = {1.0, 2.0, 3.0};
  EXPECT_DOUBLE_EQ(ft::relative_l2(got.data(), ref.data(), 3), 1.0 / std::sqrt(14.0));
  const std::vector<float> bad = {1.f, NAN, 3.f};
  EXPECT_TRUE(std::isnan(ft::relative_l2(bad.data(), ref.data(), 3)));
  const std::vector<double> zero = {0.0, 0.0, 0.0};
  EXPECT_DOUBLE_EQ(ft::relative_l2(got.data(), zero.data(), 3), 3.0);
}

// ---- The reference cache ------------------------------------------------------------------

/// A fresh directory under the system's temporary folder, removed at the end.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    // The process id: ctest runs these tests in parallel processes.
    path = std::filesystem::temp_directory_path() /
           ("ft_reference_cache_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::vector<std::filesystem::path> files() const {
    std::vector<std::filesystem::path> out;
    if (std::filesystem::exists(path))
      for (const auto& e : std::filesystem::directory_iterator(path))
        if (e.path().extension() != ".lock")  // the per-key locks stay by design (empty files)
          out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
  }
};

ft::ReferenceCacheStats delta(const ft::ReferenceCacheStats& a, const ft::ReferenceCacheStats& b) {
  return {b.computed - a.computed, b.loaded - a.loaded, b.rejected - a.rejected, b.written - a.written};
}

void expect_same(const ft::Reference& a, const ft::Reference& b) {
  EXPECT_EQ(a.tensors.O, b.tensors.O);
  EXPECT_EQ(a.tensors.lse, b.tensors.lse);
  EXPECT_EQ(a.tensors.dQ, b.tensors.dQ);
  EXPECT_EQ(a.tensors.dK, b.tensors.dK);
  EXPECT_EQ(a.tensors.dV, b.tensors.dV);
  EXPECT_EQ(a.baseline.O, b.baseline.O);
  EXPECT_EQ(a.baseline.dQ, b.baseline.dQ);
  EXPECT_EQ(a.baseline.dV, b.baseline.dV);
}

TEST(ReferenceCache, ComputesOnceThenLoadsWhatItWrote) {
  TempDir dir;
  const Problem p = shape(23, 16, true, DType::BFloat16);
  ft::clear_reference_memory_cache();
  const auto s0 = ft::reference_cache_stats();
  const ft::Reference first = ft::cached_reference(p, ft::InputKind::Uniform, 77, true, dir.path);
  const auto s1 = delta(s0, ft::reference_cache_stats());
  EXPECT_EQ(s1.computed, 2);  // the forward part and the backward part
  EXPECT_EQ(s1.written, 2);
  EXPECT_EQ(dir.files().size(), 2u) << "no temporary file may stay behind";

  // The same process asks again: memory, nothing new.
  (void)ft::cached_reference(p, ft::InputKind::Uniform, 77, true, dir.path);
  EXPECT_EQ(delta(s0, ft::reference_cache_stats()).computed, 2);

  // Another process (here: the memory cache forgotten) loads both parts from disk.
  ft::clear_reference_memory_cache();
  const auto s2 = ft::reference_cache_stats();
  const ft::Reference& again = ft::cached_reference(p, ft::InputKind::Uniform, 77, true, dir.path);
  const auto d2 = delta(s2, ft::reference_cache_stats());
  EXPECT_EQ(d2.loaded, 2);
  EXPECT_EQ(d2.computed, 0);
  expect_same(first, again);

  // What was cached is what the definitions give. (Up to the last bits of dK and dV: the
  // float64 backward adds its threads' partial sums in whatever order they finish.)
  const auto in = ft::reference_inputs(p, ft::InputKind::Uniform, 77);
  const ft::ReferenceTensors direct = reference(p, in, true);
  EXPECT_EQ(again.tensors.O, direct.O);
  EXPECT_EQ(again.tensors.dQ, direct.dQ);
  ASSERT_EQ(again.tensors.dK.size(), direct.dK.size());
  for (size_t i = 0; i < direct.dK.size(); ++i) {
    ASSERT_NEAR(again.tensors.dK[i], direct.dK[i], 1e-13 * std::fabs(direct.dK[i]) + 1e-300) << i;
    ASSERT_NEAR(again.tensors.dV[i], direct.dV[i], 1e-13 * std::fabs(direct.dV[i]) + 1e-300) << i;
  }
  const ft::TensorErrors e = ft::unfused_backward_error(p, in, direct);
  EXPECT_EQ(again.baseline.O, e.O);
  EXPECT_EQ(again.baseline.dQ, e.dQ);
  EXPECT_NEAR(again.baseline.dK, e.dK, 1e-9 * e.dK);
  EXPECT_GT(again.baseline.dQ, 0.0);
}

TEST(ReferenceCache, EveryPartOfTheKeyCounts) {
  TempDir dir;
  ft::clear_reference_memory_cache();
  Problem p = shape(9, 8, false);
  const ft::Reference a = ft::cached_reference(p, ft::InputKind::Uniform, 1, false, dir.path);
  Problem scaled = p;
  scaled.scale = 0.5f;
  Problem half = p;
  half.dtype = DType::Float16;
  const auto s0 = ft::reference_cache_stats();
  (void)ft::cached_reference(scaled, ft::InputKind::Uniform, 1, false, dir.path);
  (void)ft::cached_reference(half, ft::InputKind::Uniform, 1, false, dir.path);
  (void)ft::cached_reference(p, ft::InputKind::LargeScores, 1, false, dir.path);
  (void)ft::cached_reference(p, ft::InputKind::Uniform, 2, false, dir.path);
  p.causal = true;
  (void)ft::cached_reference(p, ft::InputKind::Uniform, 1, false, dir.path);
  EXPECT_EQ(delta(s0, ft::reference_cache_stats()).computed, 5);
  EXPECT_EQ(dir.files().size(), 6u);
  const ft::Reference& b = ft::cached_reference(scaled, ft::InputKind::Uniform, 1, false, dir.path);
  EXPECT_NE(a.tensors.O, b.tensors.O);
}

// A file that is not exactly what the key needs is recomputed and replaced, never used:
// flipped data (checksum), a truncated file, another key's file under this name.
TEST(ReferenceCache, RejectsCorruptTruncatedAndForeignFiles) {
  TempDir dir;
  const Problem p = shape(11, 8, false);
  const Problem other = shape(12, 8, false);
  ft::clear_reference_memory_cache();
  const ft::Reference good = ft::cached_reference(p, ft::InputKind::Uniform, 5, false, dir.path);
  (void)ft::cached_reference(other, ft::InputKind::Uniform, 5, false, dir.path);
  auto files = dir.files();
  ASSERT_EQ(files.size(), 2u);
  // Which file is p's: the one whose reload does not reject.
  const auto size_of = [](const std::filesystem::path& f) { return std::filesystem::file_size(f); };
  const std::filesystem::path mine = size_of(files[0]) < size_of(files[1]) ? files[0] : files[1];
  const std::filesystem::path theirs = mine == files[0] ? files[1] : files[0];

  auto reload = [&] {
    ft::clear_reference_memory_cache();
    const auto s0 = ft::reference_cache_stats();
    const ft::Reference r = ft::cached_reference(p, ft::InputKind::Uniform, 5, false, dir.path);
    expect_same(good, r);
    return delta(s0, ft::reference_cache_stats());
  };
  auto flip_last_byte = [&] {
    std::fstream f(mine, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1, std::ios::end);
    char c;
    f.get(c);
    f.seekp(-1, std::ios::end);
    f.put(char(c ^ 0x10));
  };

  EXPECT_EQ(reload().loaded, 1);
  flip_last_byte();
  auto d = reload();
  EXPECT_EQ(d.rejected, 1);
  EXPECT_EQ(d.computed, 1);
  EXPECT_EQ(reload().loaded, 1) << "the rejected file was replaced by a good one";

  std::filesystem::resize_file(mine, std::filesystem::file_size(mine) - 8);
  d = reload();
  EXPECT_EQ(d.rejected, 1);
  EXPECT_EQ(d.computed, 1);

  std::filesystem::copy_file(theirs, mine, std::filesystem::copy_options::overwrite_existing);
  d = reload();
  EXPECT_EQ(d.rejected, 1);
  EXPECT_EQ(d.computed, 1);

  { std::ofstream(mine, std::ios::trunc) << "not a reference"; }
  d = reload();
  EXPECT_EQ(d.rejected, 1);
  EXPECT_EQ(reload().loaded, 1);
  EXPECT_EQ(dir.files().size(), 2u);
}

// The fingerprint in every key must not depend on thread timing, or no process would ever
// find another's files.
TEST(ReferenceCache, FingerprintIsDeterministic) {
  const std::string fp = ft::reference_code_fingerprint();
  EXPECT_EQ(fp.size(), 16u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(ft::reference_code_fingerprint(), fp);
}

TEST(ReferenceCache, WithoutADirectoryNothingTouchesTheDisk) {
  ft::clear_reference_memory_cache();
  const Problem p = shape(7, 8, true);
  const auto s0 = ft::reference_cache_stats();
  (void)ft::cached_reference(p, ft::InputKind::Uniform, 3, true, "");
  (void)ft::cached_reference(p, ft::InputKind::Uniform, 3, true, "");
  const auto d = delta(s0, ft::reference_cache_stats());
  EXPECT_EQ(d.computed, 2);
  EXPECT_EQ(d.written, 0);
  EXPECT_EQ(d.loaded, 0);
}

// ---- Large logits: float32 emulations of chapter 05's backwards --------------------------------
//
// Each emulation follows its kernels' arithmetic step by step on the CPU, in float32, with
// the same fused multiply-adds and the same order of every sum along d (the only reordering
// is within sums over keys or queries, which the GPU splits across threads and tiles): the
// roundings that matter here are those of the softmax and of the log-sum-exp, and those are
// reproduced exactly. exp2f stands for the GPU's ex2.approx (2 ulp); that difference is far
// below what is measured.

struct Outputs {
  std::vector<float> O, lse, dQ, dK, dV;
  explicit Outputs(const Problem& p)
      : O(size_t(p.elems())), lse(size_t(p.rows())), dQ(O.size()), dK(O.size()), dV(O.size()) {}
};

std::vector<float> transposed(const float* x, int rows, int cols) {
  std::vector<float> t(size_t(rows) * cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) t[size_t(c) * rows + r] = x[size_t(r) * cols + c];
  return t;
}

/// a·b rounded to float on its own (never fused into a following add by the compiler): the
/// kernels' `x[j] * kLog2e` before the online update.
float rounded_product(float a, float b) {
  volatile float r = a * b;
  return r;
}

/// acc[j] = Σ_c a[c]·Bt[c][j] for j < n, summed in order of c (one FMA chain per j).
void row_times(const float* a, const std::vector<float>& Bt, int N, int d, int n, float* acc) {
  std::fill(acc, acc + n, 0.f);
  for (int c = 0; c < d; ++c) ft::fma_axpy(n, a[c], &Bt[size_t(c) * N], acc);
}

/// The backward both baselines share once P is in hand (the materialize kernels; the flash
/// kernels do the same arithmetic tile by tile): dV = Pᵀ·dO, dP = dO·Vᵀ, dS = P∘(dP − D) with
/// D = rowsum(dO∘O), dQ = scale·dS·K, dK = scale·dSᵀ·Q. `scale_in_ds`: the flash kernels
/// fold the scale into dS as (scale·P)·(dP − D); chapter 02's product applies it at the end.
void backward_from_p(const Problem& p, const float* q, const float* k, const float* v,
                     const float* dO, const float* O, const std::vector<float>& P, bool scale_in_ds,
                     float* dQ, float* dK, float* dV) {
  const int N = p.len_q, d = p.head_dim;
  const float scale = p.softmax_scale();
  const std::vector<float> Vt = transposed(v, N, d);
  std::vector<float> dS(size_t(N) * N, 0.f), acc(N), dq(d);
  for (int i = 0; i < N; ++i) {
    const int visible = p.causal ? i + 1 : N;
    const float D = ft::fma_dot(d, dO + size_t(i) * d, O + size_t(i) * d);
    row_times(dO + size_t(i) * d, Vt, N, d, visible, acc.data());  // dP
    for (int j = 0; j < visible; ++j) {
      const float Pij = P[size_t(i) * N + j];
      dS[size_t(i) * N + j] = scale_in_ds ? (scale * Pij) * (acc[j] - D) : Pij * (acc[j] - D);
    }
    std::fill(dq.begin(), dq.end(), 0.f);
    for (int j = 0; j < visible; ++j) ft::fma_axpy(d, dS[size_t(i) * N + j], k + size_t(j) * d, dq.data());
    for (int c = 0; c < d; ++c) dQ[size_t(i) * d + c] = scale_in_ds ? dq[c] : scale * dq[c];
  }
  std::vector<float> ak(d), av(d);
  for (int j = 0; j < N; ++j) {
    std::fill(ak.begin(), ak.end(), 0.f);
    std::fill(av.begin(), av.end(), 0.f);
    for (int i = p.causal ? j : 0; i < N; ++i) {
      ft::fma_axpy(d, P[size_t(i) * N + j], dO + size_t(i) * d, av.data());
      ft::fma_axpy(d, dS[size_t(i) * N + j], q + size_t(i) * d, ak.data());
    }
    for (int c = 0; c < d; ++c) {
      dV[size_t(j) * d + c] = av[c];
      dK[size_t(j) * d + c] = scale_in_ds ? ak[c] : scale * ak[c];
    }
  }
}

/// Chapter 05's materialize: S = scale·Q·Kᵀ (chapter 02's product: alpha·acc), the online
/// softmax in place (chapter 03: running max and sum of x = S·log2e rounded to float, then a
/// normalize pass), O = P·V, and the backward over the stored P.
/// consistent = false: the normalize pass computes 2^(S·log2e − m) with one FMA, i.e. from
/// the *unrounded* product, while the sum l was built from the rounded one (chapter 03's
/// kernel as it is). consistent = true: both from the same rounded x (chapter 05's fix).
Outputs emulate_materialize(const Problem& p, const ft::AttentionInputs& in, bool consistent) {
  const int N = p.len_q, d = p.head_dim;
  const float scale = p.softmax_scale();
  Outputs out(p);
  for (int64_t bh = 0; bh < p.heads_total(); ++bh) {
    const size_t h = size_t(bh) * N * d;
    const float *q = &in.Q[h], *k = &in.K[h], *v = &in.V[h];
    const std::vector<float> Kt = transposed(k, N, d);
    std::vector<float> P(size_t(N) * N, 0.f), acc(N);
    for (int i = 0; i < N; ++i) {
      const int visible = p.causal ? i + 1 : N;
      float* Pi = &P[size_t(i) * N];
      row_times(q + size_t(i) * d, Kt, N, d, visible, acc.data());
      for (int j = 0; j < visible; ++j) acc[j] = scale * acc[j];  // S, stored
      ft::OnlineSoftmax s = ft::online_softmax_empty();
      for (int j = 0; j < visible; ++j) ft::online_push(s, rounded_product(acc[j], ft::kLog2e));
      const float inv_l = 1.f / s.l;
      for (int j = 0; j < visible; ++j) {
        const float x = consistent ? rounded_product(acc[j], ft::kLog2e) - s.m  // as pushed
                                   : std::fma(acc[j], ft::kLog2e, -s.m);
        Pi[j] = std::exp2(x) * inv_l;
      }
      out.lse[size_t(bh) * N + i] = ft::online_lse(s);
      float* o = &out.O[h + size_t(i) * d];
      for (int j = 0; j < visible; ++j) ft::fma_axpy(d, Pi[j], v + size_t(j) * d, o);
    }
    backward_from_p(p, q, k, v, &in.dO[h], &out.O[h], P, false, &out.dQ[h], &out.dK[h],
                    &out.dV[h]);
  }
  return out;
}

enum class FlashLse {
  AsImplemented,  ///< S recomputed as (Q·Kᵀ)·(scale·log2e); P = 2^(that − L·log2e), L natural
  SameScores,     ///< S recomputed exactly as the forward formed it ((Q·scale·log2e)·Kᵀ)
  SameScoresL2,   ///< same S, and L saved in base 2: L2 = m + log2 l, rounded once
  SeparateMax,    ///< same S, and P = 2^((S − m) − log2 l) from the forward's m and l
};

/// Chapter 04's fast forward (Q pre-scaled by scale·log2e, 64-key tiles, online softmax,
/// O·(1/l), L = (m + log2 l)·ln2), then chapter 05's flash backward: D = rowsum(dO∘O),
/// P recomputed from the saved L, dS = (scale·P)∘(dP − D).
Outputs emulate_flash(const Problem& p, const ft::AttentionInputs& in, FlashLse how) {
  const int N = p.len_q, d = p.head_dim, Bc = 64;
  const float scale = p.softmax_scale(), scale_log2 = scale * ft::kLog2e;
  Outputs out(p);
  for (int64_t bh = 0; bh < p.heads_total(); ++bh) {
    const size_t h = size_t(bh) * N * d;
    const float *q = &in.Q[h], *k = &in.K[h], *v = &in.V[h];
    const std::vector<float> Kt = transposed(k, N, d);
    std::vector<float> P(size_t(N) * N, 0.f), s(N), raw(N), qs(d), o(d);
    for (int i = 0; i < N; ++i) {
      const int visible = p.causal ? i + 1 : N;
      for (int c = 0; c < d; ++c) qs[c] = q[size_t(i) * d + c] * scale_log2;
      row_times(qs.data(), Kt, N, d, visible, s.data());  // base-2 scores, as the forward has them
      ft::OnlineSoftmax st = ft::online_softmax_empty();
      std::fill(o.begin(), o.end(), 0.f);
      for (int j0 = 0; j0 < visible; j0 += Bc) {
        const int j1 = std::min(visible, j0 + Bc);
        float tile_max = -INFINITY;
        for (int j = j0; j < j1; ++j) tile_max = std::max(tile_max, s[j]);
        const float alpha = ft::online_rescale(st, tile_max);
        const float base = ft::online_exp_base(st.m);
        for (float& x : o) x *= alpha;
        for (int j = j0; j < j1; ++j) {
          const float pj = std::exp2(s[j] - base);
          st.l += pj;
          ft::fma_axpy(d, pj, v + size_t(j) * d, o.data());
        }
      }
      const float inv_l = 1.f / st.l;
      for (int c = 0; c < d; ++c) out.O[h + size_t(i) * d + c] = o[c] * inv_l;
      const float L = ft::online_lse(st);
      out.lse[size_t(bh) * N + i] = L;
      // The backward's P for this row (the kernel does this per tile; the arithmetic of each
      // entry is the same).
      const float L2 = L * ft::kLog2e;
      if (how == FlashLse::AsImplemented) row_times(q + size_t(i) * d, Kt, N, d, visible, raw.data());
      const float log2_l = std::log2(st.l);
      for (int j = 0; j < visible; ++j) {
        float x;
        switch (how) {
          case FlashLse::AsImplemented: x = std::fma(raw[j], scale_log2, -L2); break;
          case FlashLse::SameScores: x = s[j] - L2; break;
          case FlashLse::SameScoresL2: x = s[j] - (st.m + log2_l); break;
          default: x = (s[j] - st.m) - log2_l; break;
        }
        P[size_t(i) * N + j] = std::exp2(x);
      }
    }
    backward_from_p(p, q, k, v, &in.dO[h], &out.O[h], P, true, &out.dQ[h], &out.dK[h], &out.dV[h]);
  }
  return out;
}

ft::TensorErrors errors(const Outputs& o, const ft::ReferenceTensors& r) {
  ft::TensorErrors e;
  e.O = ft::relative_l2(o.O.data(), r.O.data(), o.O.size());
  e.lse = ft::relative_l2(o.lse.data(), r.lse.data(), o.lse.size());
  e.dQ = ft::relative_l2(o.dQ.data(), r.dQ.data(), o.dQ.size());
  e.dK = ft::relative_l2(o.dK.data(), r.dK.data(), o.dK.size());
  e.dV = ft::relative_l2(o.dV.data(), r.dV.data(), o.dV.size());
  return e;
}

void print_row(const char* name, const ft::TensorErrors& e, const ft::TensorErrors& base) {
  std::printf("  %-27s O %.2e (%4.1fx)  lse %.2e  dQ %.2e (%4.1fx)  dK %.2e (%4.1fx)  dV %.2e (%4.1fx)\n",
              name, e.O, e.O / base.O, e.lse, e.dQ, e.dQ / base.dQ, e.dK, e.dK / base.dK, e.dV,
              e.dV / base.dV);
}

/// The problem of the GPU tests' large-logit cases: B·H = 6, d = 64, the seed testing.cu
/// uses for the shape.
Problem large_logit_problem(int N, bool causal) { return shape(N, 64, causal); }
uint64_t test_seed(const Problem& p) {  // testing.cu's seed_for
  return 1000003ull * uint64_t(p.len_q) + 101ull * uint64_t(p.head_dim) + (p.causal ? 7 : 0);
}

class LargeLogits : public ::testing::TestWithParam<std::tuple<int, bool>> {};

// Reproduces the known problem (materialize's dQ several times the flash backward's) and
// checks what each fix does, on the inputs of the GPU tests. Every number is deterministic.
TEST_P(LargeLogits, Float32EmulationsOfChapter05) {
  const auto [N, causal] = GetParam();
  const Problem p = large_logit_problem(N, causal);
  const auto in = inputs(p, ft::InputKind::LargeScores, test_seed(p));
  const ft::ReferenceTensors ref = reference(p, in, true);
  const ft::TensorErrors base = ft::unfused_backward_error(p, in, ref);
  const ft::TensorErrors mat = errors(emulate_materialize(p, in, false), ref);
  const ft::TensorErrors mat_fixed = errors(emulate_materialize(p, in, true), ref);
  const ft::TensorErrors flash = errors(emulate_flash(p, in, FlashLse::AsImplemented), ref);
  const ft::TensorErrors same_s = errors(emulate_flash(p, in, FlashLse::SameScores), ref);
  const ft::TensorErrors base2 = errors(emulate_flash(p, in, FlashLse::SameScoresL2), ref);
  const ft::TensorErrors sep = errors(emulate_flash(p, in, FlashLse::SeparateMax), ref);
  std::printf("LargeScores %s (CPU emulation, float32; ratio to the unfused baseline)\n",
              p.describe().c_str());
  print_row("unfused float32 baseline", base, base);
  print_row("materialize (ch03 softmax)", mat, base);
  print_row("materialize, consistent P", mat_fixed, base);
  print_row("flash (as implemented)", flash, base);
  print_row("flash, same S as forward", same_s, base);
  print_row("flash, same S, L in base 2", base2, base);
  print_row("flash, same S, m and l kept", sep, base);

  // The problem: P from chapter 03's softmax does not sum to 1 (by up to ~4e-5), and
  // dS = P∘(dP − D) with D = rowsum(dO∘O) = Σ P·dP then leaves D·(1 − ΣP) in every row.
  EXPECT_GT(mat.dQ, 2 * flash.dQ);
  EXPECT_GT(mat.dQ, 4 * base.dQ);
  // The fix: normalizing with the same rounded exponent as the sum brings every tensor to
  // the baseline's error.
  for (auto [got, want] : {std::pair{mat_fixed.O, base.O}, {mat_fixed.dQ, base.dQ},
                           {mat_fixed.dK, base.dK}, {mat_fixed.dV, base.dV}})
    EXPECT_LT(got, 1.5 * want);
  // The flash backward: its P comes from a float32 L of magnitude ~1e3 and from scores
  // rounded differently than the forward's. Both together make dV far worse than the
  // baseline's; with the same scores and the max kept apart from log l it is the baseline.
  EXPECT_GT(flash.dV, 4 * base.dV);
  EXPECT_GT(flash.dQ, 1.5 * base.dQ);
  for (auto [got, want] : {std::pair{sep.O, base.O}, {sep.dQ, base.dQ}, {sep.dK, base.dK},
                           {sep.dV, base.dV}})
    EXPECT_LT(got, 1.5 * want);
}

INSTANTIATE_TEST_SUITE_P(GpuTestShapes, LargeLogits,
                         ::testing::Combine(::testing::Values(17, 1000), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<int, bool>>& param_info) {
                           return "N" + std::to_string(std::get<0>(param_info.param)) +
                                  (std::get<1>(param_info.param) ? "_causal" : "_full");
                         });

}  // namespace

// A half-precision problem's inputs are made as floats and rounded to the dtype once, in
// make_inputs, so that the kernels (which receive the dtype's bits) and the float64
// reference (which reads these floats) compute on the same numbers.
TEST(MakeInputs, HalfPrecisionInputsAreRepresentableInTheirDtype) {
  for (ft::DType t : {ft::DType::BFloat16, ft::DType::Float16}) {
    const ft::Problem p = ft::make_problem(1, 2, 33, 64, false, t);
    const ft::AttentionInputs in = ft::make_inputs(p, ft::InputKind::Uniform, 5);
    const ft::AttentionInputs f32 =
        ft::make_inputs(ft::make_problem(1, 2, 33, 64, false), ft::InputKind::Uniform, 5);
    size_t changed = 0;
    for (size_t i = 0; i < in.Q.size(); ++i) {
      EXPECT_EQ(in.Q[i], ft::round_to(t, in.Q[i])) << ft::dtype_name(t) << " at " << i;
      EXPECT_EQ(in.Q[i], ft::round_to(t, f32.Q[i]));  // the same draw, rounded
      changed += in.Q[i] != f32.Q[i];
    }
    EXPECT_GT(changed, in.Q.size() / 2) << "24 random bits rarely fit 8 or 11";
  }
}
