// CPU tests of verification: it must fail (never only print) on NaN/Inf, on the poison of
// an unwritten element, and on error above tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "harness/verify.hpp"

namespace {

TEST(Verify, ExactPasses) {
  std::vector<float> got{1, 2, 3};
  std::vector<double> ref{1, 2, 3};
  const auto r = ft::verify("O", got.data(), ref.data(), 3, 1e-4);
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.rel_l2, 0);
}

TEST(Verify, PoisonedElementFails) {
  std::vector<float> got{1, 2, 3, 4};
  std::memset(&got[2], 0xFF, sizeof(float));  // what DeviceBuffer::poison leaves behind
  std::vector<double> ref{1, 2, 3, 4};
  const auto r = ft::verify("O", got.data(), ref.data(), 4, 1e-4);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.non_finite, 1);
  EXPECT_EQ(r.first_bad, 2);
  EXPECT_NE(r.message.find("NaN"), std::string::npos);
}

TEST(Verify, InfFails) {
  std::vector<float> got{1, INFINITY};
  std::vector<double> ref{1, 1e300};
  EXPECT_FALSE(ft::verify("lse", got.data(), ref.data(), 2, 1e-4).ok);
}

TEST(Verify, ErrorAboveToleranceFails) {
  std::vector<float> got{1.001f, 2, 3};
  std::vector<double> ref{1, 2, 3};
  const auto r = ft::verify("O", got.data(), ref.data(), 3, 1e-4);
  EXPECT_FALSE(r.ok);
  EXPECT_NEAR(r.rel_l2, 0.001 / std::sqrt(14.0), 1e-6);
  EXPECT_NE(r.message.find("TOO LARGE"), std::string::npos);
  EXPECT_TRUE(ft::verify("O", got.data(), ref.data(), 3, 1e-3).ok);
}

TEST(Verify, ZeroReferenceUsesAbsoluteError) {
  std::vector<float> got{0, 1e-3f};
  std::vector<double> ref{0, 0};
  const auto r = ft::verify("dV", got.data(), ref.data(), 2, 1e-4);
  EXPECT_FALSE(r.ok);
  EXPECT_NEAR(r.rel_l2, 1e-3, 1e-9);
}

TEST(Verify, WorstPicksTheFailure) {
  std::vector<float> good{1}, bad{2};
  std::vector<double> ref{1};
  const auto a = ft::verify("a", good.data(), ref.data(), 1, 1e-4);
  const auto b = ft::verify("b", bad.data(), ref.data(), 1, 1e-4);
  EXPECT_FALSE(ft::worst(a, b).ok);
  EXPECT_FALSE(ft::worst(b, a).ok);
  EXPECT_EQ(ft::worst(b, a).message, b.message);
}

}  // namespace
