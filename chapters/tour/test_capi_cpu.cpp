// Tests of the C API (common/flashtut.h) that need no GPU: every check runs before any CUDA
// call, so a bad problem, an unsupported dtype or an unaligned pointer comes back as -1 with
// a one-line message (nothing is launched), and the workspace sizes are what the chapters
// document, with FT_WORKSPACE_ERROR telling an error from a true 0.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "flashtut.h"

namespace {

ft_problem problem(int N, int d, bool causal) {
  return ft_problem{2, 3, 3, N, N, d, causal ? 1 : 0, FT_CAUSAL_TOP_LEFT, 0.f, FT_DTYPE_FLOAT32};
}

bool says(const char* what) { return std::string(ft_last_error()).find(what) != std::string::npos; }

// Aligned fake device addresses: every check runs before any CUDA call, so none is touched.
const void* const kFake = reinterpret_cast<const void*>(uintptr_t(0x10000));
void* const kFakeOut = reinterpret_cast<void*>(uintptr_t(0x30000));
float* const kFakeLse = reinterpret_cast<float*>(uintptr_t(0x20000));

int call_ch04(const ft_problem& p, const void* Q = kFake) {
  return ft_ch04_forward(p, Q, kFake, kFake, kFakeOut, kFakeLse, nullptr, 0);
}

TEST(CApiVersion, HeaderAndLibraryAgree) {
  EXPECT_EQ(ft_api_version(), FT_API_VERSION);
  EXPECT_EQ(ft_problem_size(), sizeof(ft_problem));
}

TEST(CApiErrors, UnsupportedHeadDimIsReportedNotLaunched) {
  const ft_problem p = problem(64, 48, false);  // chapter 04 compiles d = 32, 64, 128 only
  EXPECT_EQ(call_ch04(p), -1);
  EXPECT_TRUE(says("head_dim 48")) << ft_last_error();
}

TEST(CApiErrors, NonPositiveShapeIsReported) {
  ft_problem p = problem(64, 64, false);
  p.len_q = 0;
  EXPECT_EQ(ft_ch01_forward(p, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0), -1);
  EXPECT_TRUE(says("len_q")) << ft_last_error();
  p.len_q = 64;
  p.batch = -1;
  EXPECT_EQ(ft_ch05_backward(p, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                             nullptr, nullptr, nullptr, 0),
            -1);
  EXPECT_TRUE(says("batch")) << ft_last_error();
  EXPECT_EQ(ft_ch03_row_softmax(7, nullptr, nullptr, 1, 1, 0), -1);
  EXPECT_TRUE(says("variant"));
}

// The problem the command line would refuse, the C API refuses too: one validation.
TEST(CApiErrors, LimitsOfTheCommandLineHoldHere) {
  ft_problem p = problem((1 << 24) + 1, 64, false);  // N past 2^24
  EXPECT_EQ(call_ch04(p), -1);
  EXPECT_TRUE(says("len_q must be in [1, 16777216]")) << ft_last_error();
  p = problem(64, 2048, false);  // d past 1024
  EXPECT_EQ(ft_ch01_forward(p, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0), -1);
  EXPECT_TRUE(says("head_dim must be in [1, 1024]")) << ft_last_error();
  p = problem(64, 64, false);
  p.scale = INFINITY;
  EXPECT_EQ(call_ch04(p), -1);
  EXPECT_TRUE(says("scale must be finite")) << ft_last_error();
  p.scale = -0.125f;  // the fused kernels' masks and running maxima assume scale > 0
  EXPECT_EQ(call_ch04(p), -1);
  EXPECT_TRUE(says("scale must be >= 0")) << ft_last_error();
}

// Version 4's fields: two lengths, two head counts, the alignment. What no implementation can
// run is refused by the problem's own validation; what one chapter lacks, by that chapter.
TEST(CApiErrors, KeyValueSideIsValidatedThenRefusedWhereUnsupported) {
  ft_problem p = problem(64, 64, true);
  p.heads_kv = 2;  // 3 query heads cannot share 2 key/value heads
  EXPECT_EQ(call_ch04(p), -1);
  EXPECT_TRUE(says("heads_q must be a multiple of heads_kv")) << ft_last_error();
  p.heads_kv = 0;
  EXPECT_EQ(call_ch04(p), -1);
  EXPECT_TRUE(says("heads_kv must be >= 1")) << ft_last_error();
  p.heads_kv = 3;
  p.causal_align = 2;
  EXPECT_EQ(call_ch04(p), -1);
  EXPECT_TRUE(says("causal alignment must be 0 (top-left) or 1 (bottom-right)")) << ft_last_error();
  p.causal_align = FT_CAUSAL_BOTTOM_RIGHT;
  // Equal lengths: the two alignments are one mask, and chapter 04 computes it.
  EXPECT_EQ(ft_ch04_forward_workspace_bytes(p), 0u) << ft_last_error();
  p.len_kv = 0;
  EXPECT_EQ(call_ch04(p), -1);
  EXPECT_TRUE(says("len_kv must be in [1, 16777216]")) << ft_last_error();
  // Valid problems that chapter 04 does not compute: it says what it does.
  p.len_kv = 100;
  EXPECT_EQ(call_ch04(p), -1);
  EXPECT_TRUE(says("one length only: len_q 64 != len_kv 100")) << ft_last_error();
  p.len_kv = 64;
  p.heads_kv = 1;
  EXPECT_EQ(call_ch04(p), -1);
  EXPECT_TRUE(says("heads_kv 1 != heads_q 3")) << ft_last_error();
  EXPECT_EQ(ft_ch04_forward_workspace_bytes(p), FT_WORKSPACE_ERROR);
}

// B·H·N·N·4 at B = 4, N = 2^30 wraps past 2^64 to exactly 0: the workspace query must not
// answer 0 ("no workspace needed") but the sentinel, with the reason.
TEST(CApiWorkspace, OverflowingProblemGetsTheSentinelNotAWrappedSize) {
  const ft_problem huge{4, 1, 1, 1 << 30, 1 << 30, 1, 0, FT_CAUSAL_TOP_LEFT, 0.f, FT_DTYPE_FLOAT32};
  EXPECT_EQ(ft_ch01_forward_workspace_bytes(huge), FT_WORKSPACE_ERROR);
  EXPECT_TRUE(says("len_q")) << ft_last_error();
  // Within N's limit but too many rows in all: B·H·N = 2^31.
  const ft_problem rows{128, 1, 1, 1 << 24, 1 << 24, 64, 0, FT_CAUSAL_TOP_LEFT, 0.f, FT_DTYPE_FLOAT32};
  EXPECT_EQ(ft_ch02_forward_workspace_bytes(rows), FT_WORKSPACE_ERROR);
  EXPECT_TRUE(says("2^31 - 1 query rows")) << ft_last_error();
  EXPECT_EQ(call_ch04(rows), -1);
}

// Valid sizes whose N×N grid needs more blocks than one launch holds: the workspace query
// says so (the sentinel) rather than answering a size the forward would then refuse.
TEST(CApiWorkspace, AGridTooLargeToLaunchGetsTheSentinel) {
  ft_problem p{1, 1, 1, 1 << 24, 1 << 24, 64, 0, FT_CAUSAL_TOP_LEFT, 0.f, FT_DTYPE_FLOAT32};
  EXPECT_EQ(ft_ch01_forward_workspace_bytes(p), FT_WORKSPACE_ERROR);
  EXPECT_TRUE(says("exceed one grid")) << ft_last_error();
  p.dtype = FT_DTYPE_BF16;
  EXPECT_EQ(ft_ch06_forward_workspace_bytes(p), FT_WORKSPACE_ERROR);
  EXPECT_TRUE(says("more than one grid holds")) << ft_last_error();
  p.len_q = p.len_kv = 1 << 14;  // 16384: fine
  EXPECT_NE(ft_ch06_forward_workspace_bytes(p), FT_WORKSPACE_ERROR);
}

TEST(CApiWorkspace, ZeroIsATrueAnswerAndClearsTheError) {
  EXPECT_EQ(ft_ch01_forward_workspace_bytes(problem(0, 64, false)), FT_WORKSPACE_ERROR);
  EXPECT_STRNE(ft_last_error(), "");
  EXPECT_EQ(ft_ch04_forward_workspace_bytes(problem(100, 64, false)), 0u);
  EXPECT_STREQ(ft_last_error(), "");
  // An unsupported head dim is an error for the workspace query too, not a size.
  EXPECT_EQ(ft_ch04_forward_workspace_bytes(problem(100, 48, false)), FT_WORKSPACE_ERROR);
}

TEST(CApiWorkspace, GridForTheMaterializingChaptersNoneForTheFusedOne) {
  const ft_problem p = problem(100, 64, false);
  const size_t grid = size_t(2) * 3 * 100 * 100 * sizeof(float);  // B·H·N·N floats
  EXPECT_EQ(ft_ch01_forward_workspace_bytes(p), grid);
  EXPECT_GE(ft_ch02_forward_workspace_bytes(p), grid);
  EXPECT_GE(ft_ch03_forward_workspace_bytes(p), grid);
  EXPECT_EQ(ft_ch04_forward_workspace_bytes(p), 0u);
  EXPECT_EQ(ft_ch04_forward_simple_workspace_bytes(p), 0u);
  EXPECT_GE(ft_ch05_backward_materialize_workspace_bytes(p), 2 * grid);  // P and dP
  // The flash backward keeps O(N) beside its inputs: D, one float per query row.
  EXPECT_LT(ft_ch05_backward_workspace_bytes(p), grid / 10);
  EXPECT_LT(ft_ch05_backward_dq_pass_workspace_bytes(p), grid / 10);
}

// Beyond self-attention: chapter 07 takes two lengths and grouped heads (an index in its
// kernel); every other chapter refuses them before anything else, saying what it supports.
TEST(CApiKeyValue, OnlyChapter07TakesTwoLengthsAndGroupedHeads) {
  using Query = size_t (*)(ft_problem);
  const std::pair<const char*, Query> f32[] = {
      {"ch01", ft_ch01_forward_workspace_bytes},
      {"ch02", ft_ch02_forward_workspace_bytes},
      {"ch03", ft_ch03_forward_workspace_bytes},
      {"ch04", ft_ch04_forward_workspace_bytes},
      {"ch04_simple", ft_ch04_forward_simple_workspace_bytes},
      {"ch05_materialize", ft_ch05_forward_materialize_workspace_bytes},
      {"ch05", ft_ch05_backward_workspace_bytes},
      {"ch05_dq_pass", ft_ch05_backward_dq_pass_workspace_bytes},
      {"ch05_bc128", ft_ch05_backward_bc128_workspace_bytes},
      {"ch05_materialize_backward", ft_ch05_backward_materialize_workspace_bytes}};
  const std::pair<const char*, Query> half[] = {{"ch06", ft_ch06_forward_workspace_bytes},
                                                {"ch08", ft_ch08_backward_workspace_bytes}};
  ft_problem lengths = problem(64, 64, true), grouped = problem(64, 64, true);
  lengths.len_kv = 100;
  lengths.causal_align = FT_CAUSAL_BOTTOM_RIGHT;
  grouped.heads_kv = 1;
  const auto refuses = [&](const char* name, Query q, ft_problem p) {
    EXPECT_EQ(q(p), FT_WORKSPACE_ERROR) << name;
    const bool said = says("one length only") || says("as many key/value heads as query heads");
    EXPECT_TRUE(said) << name << ": " << ft_last_error();
  };
  for (const auto& [name, q] : f32) {
    refuses(name, q, lengths);
    refuses(name, q, grouped);
  }
  for (auto* p : {&lengths, &grouped}) p->dtype = FT_DTYPE_BF16;
  for (const auto& [name, q] : half) {
    refuses(name, q, lengths);
    refuses(name, q, grouped);
  }
  EXPECT_EQ(ft_ch07_forward_workspace_bytes(lengths), 0u) << ft_last_error();
  EXPECT_EQ(ft_ch07_forward_workspace_bytes(grouped), 0u) << ft_last_error();
}

// Chapters 01–05 compute in float32; bf16 and fp16 get -1 and a line that says so.
TEST(CApiDtype, FloatChaptersRefuseHalfPrecision) {
  for (int dtype : {FT_DTYPE_BF16, FT_DTYPE_FP16}) {
    ft_problem p = problem(64, 64, false);
    p.dtype = dtype;
    EXPECT_EQ(call_ch04(p), -1);
    EXPECT_TRUE(says("does not support dtype")) << ft_last_error();
    EXPECT_EQ(ft_ch01_forward(p, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0), -1);
    EXPECT_EQ(ft_ch05_backward(p, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                               nullptr, nullptr, nullptr, 0),
              -1);
    EXPECT_EQ(ft_ch05_backward_workspace_bytes(p), FT_WORKSPACE_ERROR);
  }
  ft_problem p = problem(64, 64, false);
  p.dtype = 7;  // not an ft_dtype at all
  EXPECT_EQ(call_ch04(p), -1);
  EXPECT_TRUE(says("dtype must be 0 (float32), 1 (bf16) or 2 (fp16)")) << ft_last_error();
}

// A fake device address 4 bytes past a 16-byte boundary: refused by the alignment check,
// which runs before any CUDA call (so this needs no GPU).
TEST(CApiAlignment, UnalignedPointerIsRefusedBeforeAnyLaunch) {
  const ft_problem p = problem(64, 64, false);
  const void* unaligned = reinterpret_cast<const void*>(uintptr_t(0x1004));
  EXPECT_EQ(call_ch04(p, unaligned), -1);
  EXPECT_TRUE(says("Q = 0x1004 is not a multiple of 16 bytes")) << ft_last_error();
  float* lse = reinterpret_cast<float*>(uintptr_t(0x2008));
  void* work = reinterpret_cast<void*>(uintptr_t(0x40000));
  EXPECT_EQ(ft_ch05_backward(p, kFake, kFake, kFake, kFake, lse, kFake, kFakeOut, kFakeOut,
                             kFakeOut, work, 0),
            -1);
  EXPECT_TRUE(says("lse = 0x2008")) << ft_last_error();
  EXPECT_EQ(ft_ch03_row_softmax(1, reinterpret_cast<const float*>(uintptr_t(0x1002)),
                                static_cast<float*>(kFakeOut), 1, 4, 0),
            -1);
  EXPECT_TRUE(says("in = 0x1002 is not a multiple of 4 bytes")) << ft_last_error();
}

// A NULL where memory is needed is refused by name before any launch (the kernels would
// fault on it and poison the caller's context): the tensors, lse, and the workspace of a
// function that needs one.
TEST(CApiPointers, NullIsRefusedByName) {
  const ft_problem p = problem(64, 64, false);
  const void* fake = kFake;
  float* lse = kFakeLse;
  void* out = kFakeOut;
  EXPECT_EQ(ft_ch04_forward(p, fake, nullptr, fake, out, lse, nullptr, 0), -1);
  EXPECT_TRUE(says("K is NULL")) << ft_last_error();
  EXPECT_EQ(ft_ch04_forward(p, fake, fake, fake, out, nullptr, nullptr, 0), -1);
  EXPECT_TRUE(says("lse is NULL")) << ft_last_error();
  // Chapter 01 needs its N×N grid in the workspace.
  EXPECT_EQ(ft_ch01_forward(p, fake, fake, fake, out, lse, nullptr, 0), -1);
  EXPECT_TRUE(says("workspace is NULL")) << ft_last_error();
  EXPECT_EQ(ft_ch05_backward(p, fake, fake, fake, fake, lse, fake, out, out, nullptr, nullptr, 0),
            -1);
  EXPECT_TRUE(says("dV is NULL")) << ft_last_error();
}

// Views (API version 3): the strided functions check the layout first, before the
// pointers, the GPU and any launch: a NULL layout, a stride that leaves rows unaligned, a
// negative one, outputs whose elements overlap are each refused with -1 and a message.
ft_layout contiguous(const ft_problem& p) {
  const int64_t row = p.head_dim, head = row * p.len_q;
  const ft_strides s{head * p.heads_q, head, row};
  return ft_layout{s, s, s, s, s, s, s, s};
}

TEST(CApiViews, BadLayoutsAreRefusedBeforeAnyLaunch) {
  ft_problem p = problem(64, 64, false);
  p.dtype = FT_DTYPE_BF16;
  void* out = kFakeOut;
  EXPECT_EQ(ft_ch07_forward_strided(p, nullptr, kFake, kFake, kFake, out, kFakeLse, nullptr, 0), -1);
  EXPECT_TRUE(says("layout is NULL")) << ft_last_error();
  ft_layout l = contiguous(p);
  l.K.row = 68;  // 136 bytes: rows 8 bytes off 16-byte alignment
  EXPECT_EQ(ft_ch07_forward_strided(p, &l, kFake, kFake, kFake, out, kFakeLse, nullptr, 0), -1);
  EXPECT_TRUE(says("K's strides")) << ft_last_error();
  EXPECT_TRUE(says("multiple of 8 elements")) << ft_last_error();
  l = contiguous(p);
  l.Q.head = -l.Q.head;
  EXPECT_EQ(ft_ch07_forward_strided(p, &l, kFake, kFake, kFake, out, kFakeLse, nullptr, 0), -1);
  EXPECT_TRUE(says("negative stride")) << ft_last_error();
  l = contiguous(p);
  l.dV.row = 32;  // rows of 64 elements 32 apart: every element of dV but the edges twice
  EXPECT_EQ(ft_ch08_backward_strided(p, &l, kFake, kFake, kFake, kFake, kFakeLse, kFake, out, out,
                                     out, out, 0),
            -1);
  EXPECT_TRUE(says("dV's strides")) << ft_last_error();
  EXPECT_TRUE(says("must not overlap")) << ft_last_error();
  // A view of a tensor that is only read may overlap (K and V the same rows, say).
  l = contiguous(p);
  l.O.row = 32;  // O is the backward's input: accepted, and the next check is the pointers'
  EXPECT_EQ(ft_ch08_backward_strided(p, &l, kFake, kFake, kFake, kFake, kFakeLse, kFake, out, out,
                                     nullptr, out, 0),
            -1);
  EXPECT_TRUE(says("dV is NULL")) << ft_last_error();
  // Strides of a dimension of length 1 are never stepped: any value passes.
  p.batch = 1;
  l = contiguous(p);
  l.Q.batch = 3;
  EXPECT_EQ(ft_ch07_forward_strided(p, &l, kFake, nullptr, kFake, out, kFakeLse, nullptr, 0), -1);
  EXPECT_TRUE(says("K is NULL")) << ft_last_error();
}

}  // namespace
