// The rules a view must keep before a kernel reads or writes it (strides.hpp): what
// check_strides accepts and refuses, on the layouts a model passes and on broken ones.
#include <gtest/gtest.h>

#include "core/check.cuh"
#include "core/strides.hpp"

namespace {

ft::Problem bf16(int B, int H, int N, int d) {
  return ft::make_problem(B, H, N, d, false, ft::DType::BFloat16);
}

TEST(Strides, ContiguousIsTheLayoutContract) {
  const ft::Problem p = bf16(2, 3, 5, 64);
  const ft::Strides s = ft::q_strides(p);
  EXPECT_EQ(s.row, 64);
  EXPECT_EQ(s.head, 5 * 64);
  EXPECT_EQ(s.batch, 3 * 5 * 64);
  EXPECT_EQ(ft::head_start(s, 4, 3), 1 * s.batch + 1 * s.head);  // head 4 = batch 1, head 1
  EXPECT_NO_THROW(ft::check_layout(p, ft::contiguous_layout(p), true));
}

TEST(Strides, AModelsProjectionIsAView) {
  // q of one [B, N, 3, H, d] product seen as [B, H, N, d]; O written as [B, N, H, d].
  const ft::Problem p = bf16(2, 12, 1024, 64);
  const int64_t C = 12 * 64;
  const ft::Strides qkv{1024 * 3 * C, 64, 3 * C}, tokens{1024 * C, 64, C};
  EXPECT_NO_THROW(ft::check_strides(p, qkv, "Q", false));
  EXPECT_NO_THROW(ft::check_strides(p, tokens, "O", true));
  EXPECT_EQ(ft::head_start(qkv, 12 + 5, 12), 1024 * 3 * C + 5 * 64);  // batch 1, head 5
}

TEST(Strides, RowsMustStartAligned) {
  const ft::Problem p = bf16(2, 3, 5, 64);
  ft::Strides s = ft::q_strides(p);
  s.row = 68;  // 136 bytes
  EXPECT_THROW(ft::check_strides(p, s, "K", false), ft::Unsupported);
  s = ft::q_strides(p);
  s.head += 4;
  EXPECT_THROW(ft::check_strides(p, s, "K", false), ft::Unsupported);
  // float32 rows: 4 elements make 16 bytes.
  ft::Problem f = p;
  f.dtype = ft::DType::Float32;
  s = ft::q_strides(f);
  s.row = 68;
  EXPECT_NO_THROW(ft::check_strides(f, s, "K", false));
}

TEST(Strides, LengthOneDimensionsAreNeverStepped) {
  const ft::Problem p = bf16(1, 3, 1, 64);  // B = 1, N = 1: any batch and row stride
  ft::Strides s = ft::q_strides(p);
  s.batch = 3;
  s.row = 1;
  EXPECT_NO_THROW(ft::check_strides(p, s, "O", true));
}

TEST(Strides, NegativeHugeAndOverlappingAreRefused) {
  const ft::Problem p = bf16(2, 3, 5, 64);
  ft::Strides s = ft::q_strides(p);
  s.head = -s.head;
  EXPECT_THROW(ft::check_strides(p, s, "Q", false), ft::Unsupported);
  s = ft::q_strides(p);
  s.batch = ft::kMaxReach;  // (B − 1)·batch reaches past 2^60
  s.batch += 8;
  EXPECT_THROW(ft::check_strides(p, s, "Q", false), ft::Unsupported);
  s = ft::q_strides(p);
  s.row = int64_t(1) << 31;
  EXPECT_THROW(ft::check_strides(p, s, "Q", false), ft::Unsupported);
  // Overlap: harmless for a tensor only read, refused for one written.
  s = ft::q_strides(p);
  s.row = 32;
  EXPECT_NO_THROW(ft::check_strides(p, s, "K", false));
  EXPECT_THROW(ft::check_strides(p, s, "dK", true), ft::Unsupported);
  // Heads inside tokens, but a token's heads overlap the next token's.
  const ft::Strides tight{5 * 3 * 64, 64, 2 * 64};
  EXPECT_THROW(ft::check_strides(p, tight, "O", true), ft::Unsupported);
  const ft::Strides exact{5 * 3 * 64, 64, 3 * 64};
  EXPECT_NO_THROW(ft::check_strides(p, exact, "O", true));
}

}  // namespace
