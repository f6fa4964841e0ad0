// Tests of the C API (common/api/flashtut.h) that need no GPU: every check runs before any CUDA
// call, so a bad problem, an unsupported dtype or an unaligned pointer comes back as -1 with
// a one-line message (nothing is launched), and the workspace sizes are what the chapters
// document, with FT_WORKSPACE_ERROR telling an error from a true 0.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "03_online_softmax/online_softmax.hpp"  // ft_ch03_row_softmax
#include "api/flashtut.h"
#include "harness/harness.hpp"  // ft::gpu_available, for the skip

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
  return ft_forward("ch04", p, Q, kFake, kFake, kFakeOut, kFakeLse, nullptr, 0);
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
  EXPECT_EQ(ft_forward("ch01", p, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0), -1);
  EXPECT_TRUE(says("len_q")) << ft_last_error();
  p.len_q = 64;
  p.batch = -1;
  EXPECT_EQ(ft_backward("ch05", p, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
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
  EXPECT_EQ(ft_forward("ch01", p, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0), -1);
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
  EXPECT_EQ(ft_forward_workspace_bytes("ch04", p), 0u) << ft_last_error();
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
  EXPECT_EQ(ft_forward_workspace_bytes("ch04", p), FT_WORKSPACE_ERROR);
}

// B·H·N·N·4 at B = 4, N = 2^30 wraps past 2^64 to exactly 0: the workspace query must not
// answer 0 ("no workspace needed") but the sentinel, with the reason.
TEST(CApiWorkspace, OverflowingProblemGetsTheSentinelNotAWrappedSize) {
  const ft_problem huge{4, 1, 1, 1 << 30, 1 << 30, 1, 0, FT_CAUSAL_TOP_LEFT, 0.f, FT_DTYPE_FLOAT32};
  EXPECT_EQ(ft_forward_workspace_bytes("ch01", huge), FT_WORKSPACE_ERROR);
  EXPECT_TRUE(says("len_q")) << ft_last_error();
  // Within N's limit but too many rows in all: B·H·N = 2^31.
  const ft_problem rows{128, 1, 1, 1 << 24, 1 << 24, 64, 0, FT_CAUSAL_TOP_LEFT, 0.f, FT_DTYPE_FLOAT32};
  EXPECT_EQ(ft_forward_workspace_bytes("ch02", rows), FT_WORKSPACE_ERROR);
  EXPECT_TRUE(says("2^31 - 1 query rows")) << ft_last_error();
  EXPECT_EQ(call_ch04(rows), -1);
}

// Valid sizes whose N×N grid needs more blocks than one launch holds: the workspace query
// says so (the sentinel) rather than answering a size the forward would then refuse.
TEST(CApiWorkspace, AGridTooLargeToLaunchGetsTheSentinel) {
  ft_problem p{1, 1, 1, 1 << 24, 1 << 24, 64, 0, FT_CAUSAL_TOP_LEFT, 0.f, FT_DTYPE_FLOAT32};
  EXPECT_EQ(ft_forward_workspace_bytes("ch01", p), FT_WORKSPACE_ERROR);
  EXPECT_TRUE(says("exceed one grid")) << ft_last_error();
  p.dtype = FT_DTYPE_BF16;
  EXPECT_EQ(ft_forward_workspace_bytes("ch06", p), FT_WORKSPACE_ERROR);
  EXPECT_TRUE(says("more than one grid holds")) << ft_last_error();
  p.len_q = p.len_kv = 1 << 14;  // 16384: fine
  EXPECT_NE(ft_forward_workspace_bytes("ch06", p), FT_WORKSPACE_ERROR);
}

TEST(CApiWorkspace, ZeroIsATrueAnswerAndClearsTheError) {
  EXPECT_EQ(ft_forward_workspace_bytes("ch01", problem(0, 64, false)), FT_WORKSPACE_ERROR);
  EXPECT_STRNE(ft_last_error(), "");
  EXPECT_EQ(ft_forward_workspace_bytes("ch04", problem(100, 64, false)), 0u);
  EXPECT_STREQ(ft_last_error(), "");
  // An unsupported head dim is an error for the workspace query too, not a size.
  EXPECT_EQ(ft_forward_workspace_bytes("ch04", problem(100, 48, false)), FT_WORKSPACE_ERROR);
}

TEST(CApiWorkspace, GridForTheMaterializingChaptersNoneForTheFusedOne) {
  const ft_problem p = problem(100, 64, false);
  const size_t grid = size_t(2) * 3 * 100 * 100 * sizeof(float);  // B·H·N·N floats
  EXPECT_EQ(ft_forward_workspace_bytes("ch01", p), grid);
  EXPECT_GE(ft_forward_workspace_bytes("ch02", p), grid);
  EXPECT_GE(ft_forward_workspace_bytes("ch03", p), grid);
  EXPECT_EQ(ft_forward_workspace_bytes("ch04", p), 0u);
  EXPECT_EQ(ft_forward_workspace_bytes("ch04_simple", p), 0u);
  EXPECT_GE(ft_backward_workspace_bytes("ch05_materialize", p), 2 * grid);  // P and dP
  // The flash backward keeps O(N) beside its inputs: D, one float per query row.
  EXPECT_LT(ft_backward_workspace_bytes("ch05", p), grid / 10);
  EXPECT_LT(ft_backward_workspace_bytes("ch05_flash_dq_pass", p), grid / 10);
}

// Beyond self-attention: chapter 07's fastest takes two lengths and grouped heads (an index
// in its kernel), as do the chapters written for them from the start (09 on); every other
// implementation refuses them before anything else, saying what it supports, and the
// listing says which is which.
TEST(CApiKeyValue, TheListingSaysWhoTakesTwoLengthsAndGroupedHeads) {
  ft_problem lengths = problem(64, 64, true), grouped = problem(64, 64, true);
  lengths.len_kv = 100;
  lengths.causal_align = FT_CAUSAL_BOTTOM_RIGHT;
  grouped.heads_kv = 1;
  int takes = 0;
  for (int i = 0; i < ft_impl_count(); ++i) {
    ft_impl_info info{};
    ASSERT_EQ(ft_impl_info_at(i, &info), 0) << ft_last_error();
    SCOPED_TRACE(info.name);
    EXPECT_EQ(info.lengths, info.grouped);
    const bool backward = std::string(info.pass) == "backward";
    for (ft_problem p : {lengths, grouped}) {
      p.dtype = (info.dtypes >> FT_DTYPE_FLOAT32) & 1 ? FT_DTYPE_FLOAT32 : FT_DTYPE_BF16;
      if (info.num_head_dims > 0) p.head_dim = info.head_dims[0];  // one it computes (chapter 10's step 11: 128)
      const bool decode = std::string(info.chapter) == "11";
      if (decode) {  // a decode takes at most 16 query rows, and its workspace query says so
        EXPECT_EQ(ft_forward_workspace_bytes(info.name, p), FT_WORKSPACE_ERROR);
        EXPECT_TRUE(says("decodes at most 16 query rows")) << ft_last_error();
        p.len_q = 1;
      }
      const size_t bytes = backward ? ft_backward_workspace_bytes(info.name, p)
                                    : ft_forward_workspace_bytes(info.name, p);
      if (info.lengths) {
        EXPECT_NE(bytes, FT_WORKSPACE_ERROR) << ft_last_error();
      } else {
        EXPECT_EQ(bytes, FT_WORKSPACE_ERROR);
        EXPECT_TRUE(says("one length only") || says("as many key/value heads as query heads"))
            << ft_last_error();
      }
    }
    takes += info.lengths;
    // Chapters 01-08 keep their measured kernels: only 07's fastest took the index.
    if (std::string(info.chapter) <= "08") {
      EXPECT_EQ(bool(info.lengths), std::string(info.name) == "ch07_fastest");
    }
  }
  EXPECT_GE(takes, 1);
  lengths.dtype = FT_DTYPE_BF16;
  EXPECT_EQ(ft_forward_workspace_bytes("ch07", lengths), 0u) << ft_last_error();
}

// The registry as the C API lists it: every chapter's implementations, names unique, each
// one's fields filled, the aliases the chapters' READMEs use, backwards paired with a listed
// forward; an unknown name is refused with the names there are.
TEST(CApiRegistry, ListsEveryChapterAndFindsByNameOrAlias) {
  std::set<std::string> forwards, backwards, chapters, aliases;
  const int n = ft_impl_count();
  ASSERT_GT(n, 0);
  for (int i = 0; i < n; ++i) {
    ft_impl_info info{};
    ASSERT_EQ(ft_impl_info_at(i, &info), 0) << ft_last_error();
    const std::string pass = info.pass, name = info.name;
    EXPECT_EQ(name, "ch" + std::string(info.chapter) + "_" + info.variant);
    EXPECT_TRUE((pass == "forward" ? forwards : backwards).insert(name).second) << name;
    EXPECT_NE(info.dtypes, 0u) << name;
    EXPECT_FALSE(std::string(info.what).empty()) << name;
    chapters.insert(info.chapter);
    if (*info.alias) aliases.insert(pass + ":" + info.alias);
    if (pass == "backward") EXPECT_EQ(forwards.count(info.pairs_with), 1u) << name << " pairs with " << info.pairs_with;
    else EXPECT_STREQ(info.pairs_with, "") << name;
  }
  // Every chapter folder of the tree (chapters/NN_*/CMakeLists.txt) registers, nothing else.
  std::set<std::string> folders;
  for (const auto& e : std::filesystem::directory_iterator(FT_SOURCE_DIR "/chapters")) {
    const std::string name = e.path().filename().string();
    if (name.size() > 3 && std::isdigit(name[0]) && std::isdigit(name[1]) && name[2] == '_' &&
        std::filesystem::exists(e.path() / "CMakeLists.txt"))
      folders.insert(name.substr(0, 2));
  }
  EXPECT_EQ(chapters, folders);
  for (const char* a : {"forward:ch01", "forward:ch02", "forward:ch03", "forward:ch04", "forward:ch06",
                        "forward:ch07", "backward:ch05", "backward:ch08"})
    EXPECT_EQ(aliases.count(a), 1u) << a;
  EXPECT_EQ(ft_impl_info_at(n, nullptr), -1);
  ft_impl_info info{};
  EXPECT_EQ(ft_impl_info_at(n, &info), -1);
  EXPECT_TRUE(says("no implementation")) << ft_last_error();
  // By alias and by name: the same implementation answers.
  ft_problem half = problem(64, 64, false);
  half.dtype = FT_DTYPE_BF16;
  EXPECT_EQ(ft_forward_workspace_bytes("ch07", half), 0u) << ft_last_error();
  EXPECT_EQ(ft_forward_workspace_bytes("ch07_fastest", half), 0u) << ft_last_error();
  EXPECT_EQ(ft_forward_workspace_bytes("ch99", problem(64, 64, false)), FT_WORKSPACE_ERROR);
  EXPECT_TRUE(says("no forward implementation named 'ch99'")) << ft_last_error();
  EXPECT_TRUE(says("ch07_fastest")) << "the message lists the names there are: " << ft_last_error();
  EXPECT_EQ(ft_forward(nullptr, problem(64, 64, false), kFake, kFake, kFake, kFakeOut, kFakeLse,
                       nullptr, 0), -1);
  EXPECT_TRUE(says("name is NULL")) << ft_last_error();
  EXPECT_EQ(ft_backward_workspace_bytes("ch07", problem(64, 64, false)), FT_WORKSPACE_ERROR);
  EXPECT_TRUE(says("no backward implementation named 'ch07'")) << ft_last_error();
}

// Chapters 01–05 compute in float32; bf16 and fp16 get -1 and a line that says so.
TEST(CApiDtype, FloatChaptersRefuseHalfPrecision) {
  for (int dtype : {FT_DTYPE_BF16, FT_DTYPE_FP16}) {
    ft_problem p = problem(64, 64, false);
    p.dtype = dtype;
    EXPECT_EQ(call_ch04(p), -1);
    EXPECT_TRUE(says("does not support dtype")) << ft_last_error();
    EXPECT_EQ(ft_forward("ch01", p, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0), -1);
    EXPECT_EQ(ft_backward("ch05", p, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                               nullptr, nullptr, nullptr, 0),
              -1);
    EXPECT_EQ(ft_backward_workspace_bytes("ch05", p), FT_WORKSPACE_ERROR);
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
  EXPECT_EQ(ft_backward("ch05", p, kFake, kFake, kFake, kFake, lse, kFake, kFakeOut, kFakeOut,
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
  EXPECT_EQ(ft_forward("ch04", p, fake, nullptr, fake, out, lse, nullptr, 0), -1);
  EXPECT_TRUE(says("K is NULL")) << ft_last_error();
  EXPECT_EQ(ft_forward("ch04", p, fake, fake, fake, out, nullptr, nullptr, 0), -1);
  EXPECT_TRUE(says("lse is NULL")) << ft_last_error();
  // Chapter 01 needs its N×N grid in the workspace.
  EXPECT_EQ(ft_forward("ch01", p, fake, fake, fake, out, lse, nullptr, 0), -1);
  EXPECT_TRUE(says("workspace is NULL")) << ft_last_error();
  EXPECT_EQ(ft_backward("ch05", p, fake, fake, fake, fake, lse, fake, out, out, nullptr, nullptr, 0),
            -1);
  EXPECT_TRUE(says("dV is NULL")) << ft_last_error();
}

// Without a GPU, a call that passes every check fails as CUDA fails (a code > 0), and the
// message says why first: "no CUDA GPU found", not the first CUDA call that broke. On a
// machine with a GPU these calls would launch on the fake pointers: skipped there.
TEST(CApiNoGpu, ACallThatWouldLaunchSaysThereIsNoGpu) {
  if (ft::gpu_available(nullptr)) GTEST_SKIP() << "a GPU is here: these are the words without one";
  const ft_problem p = problem(64, 64, false);
  void* work = reinterpret_cast<void*>(uintptr_t(0x40000));
  EXPECT_GT(call_ch04(p), 0);
  EXPECT_EQ(std::string(ft_last_error()).rfind("no CUDA GPU found", 0), 0u) << ft_last_error();
  EXPECT_GT(ft_backward("ch05", p, kFake, kFake, kFake, kFake, kFakeLse, kFake, kFakeOut, kFakeOut,
                        kFakeOut, work, 0),
            0);
  EXPECT_EQ(std::string(ft_last_error()).rfind("no CUDA GPU found", 0), 0u) << ft_last_error();
  EXPECT_GT(ft_ch03_row_softmax(1, static_cast<const float*>(kFake), static_cast<float*>(kFakeOut), 1, 4, 0), 0);
  EXPECT_EQ(std::string(ft_last_error()).rfind("no CUDA GPU found", 0), 0u) << ft_last_error();
  // No rows: nothing to launch, so no GPU is needed to do it.
  EXPECT_EQ(ft_ch03_row_softmax(1, static_cast<const float*>(kFake), static_cast<float*>(kFakeOut), 0, 4, 0), 0);
}

// The reference runs on the host: a NULL there asks for host memory.
TEST(CApiPointers, TheReferenceAsksForHostMemory) {
  const ft_problem p = problem(4, 64, false);
  std::vector<float> x(2 * 3 * 4 * 64);
  std::vector<double> o(x.size()), lse(2 * 3 * 4);
  EXPECT_EQ(ft_reference_forward(p, x.data(), nullptr, x.data(), o.data(), lse.data()), -1);
  EXPECT_TRUE(says("K is NULL: pass a host pointer")) << ft_last_error();
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
  EXPECT_EQ(ft_forward_strided("ch07", p, nullptr, kFake, kFake, kFake, out, kFakeLse, nullptr, 0), -1);
  EXPECT_TRUE(says("layout is NULL")) << ft_last_error();
  ft_layout l = contiguous(p);
  l.K.row = 68;  // 136 bytes: rows 8 bytes off 16-byte alignment
  EXPECT_EQ(ft_forward_strided("ch07", p, &l, kFake, kFake, kFake, out, kFakeLse, nullptr, 0), -1);
  EXPECT_TRUE(says("K's strides")) << ft_last_error();
  EXPECT_TRUE(says("multiple of 8 elements")) << ft_last_error();
  l = contiguous(p);
  l.Q.head = -l.Q.head;
  EXPECT_EQ(ft_forward_strided("ch07", p, &l, kFake, kFake, kFake, out, kFakeLse, nullptr, 0), -1);
  EXPECT_TRUE(says("negative stride")) << ft_last_error();
  l = contiguous(p);
  l.dV.row = 32;  // rows of 64 elements 32 apart: every element of dV but the edges twice
  EXPECT_EQ(ft_backward_strided("ch08", p, &l, kFake, kFake, kFake, kFake, kFakeLse, kFake, out, out,
                                     out, out, 0),
            -1);
  EXPECT_TRUE(says("dV's strides")) << ft_last_error();
  EXPECT_TRUE(says("must not overlap")) << ft_last_error();
  // A view of a tensor that is only read may overlap (K and V the same rows, say).
  l = contiguous(p);
  l.O.row = 32;  // O is the backward's input: accepted, and the next check is the pointers'
  EXPECT_EQ(ft_backward_strided("ch08", p, &l, kFake, kFake, kFake, kFake, kFakeLse, kFake, out, out,
                                     nullptr, out, 0),
            -1);
  EXPECT_TRUE(says("dV is NULL")) << ft_last_error();
  // Strides of a dimension of length 1 are never stepped: any value passes.
  p.batch = 1;
  l = contiguous(p);
  l.Q.batch = 3;
  EXPECT_EQ(ft_forward_strided("ch07", p, &l, kFake, nullptr, kFake, out, kFakeLse, nullptr, 0), -1);
  EXPECT_TRUE(says("K is NULL")) << ft_last_error();
}

}  // namespace
