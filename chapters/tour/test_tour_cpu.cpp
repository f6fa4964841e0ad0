// CPU tests of the tour's own words (tour.hpp): the flags it refuses, each with why and what
// to run instead; its note without a GPU (no CSV written); and the "what changed" column,
// cut at a word boundary with an ellipsis (common/harness/text.hpp, which the chapter
// programs' table uses too).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "harness/text.hpp"
#include "tour/tour.hpp"

namespace {

ft::ParseResult parse(std::vector<std::string> args) {
  std::vector<const char*> argv{"tour"};
  for (auto& a : args) argv.push_back(a.c_str());
  return ft::parse_options(int(argv.size()), argv.data(), tour::options());
}

// Each step runs in its own dtype and variant: the flags that would change nothing are
// refused, saying why and which program takes them, never accepted and ignored.
TEST(TourOptions, RefusesFlagsThatWouldChangeNothing) {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const Case cases[] = {
      {{"--dtype", "bf16"}, "--dtype is not taken by tour: the tour runs every chapter in its own dtype"},
      {{"--dtype=float32"}, "run that chapter's program with --dtype"},
      {{"--variant", "fast"}, "--variant is not taken by tour: the tour runs one variant a chapter"},
      {{"--seq-len", "256", "--no-baseline"}, "--no-baseline is not taken by tour"},
      {{"--ledger-csv", "l.csv"}, "run that chapter's program with --ledger-csv"},
      {{"--graph"}, "run that chapter's program with --graph"}};
  for (const auto& c : cases) {
    const auto r = parse(c.args);
    EXPECT_FALSE(r.ok) << c.args[0];
    EXPECT_EQ(r.exit_code, 2) << c.args[0];
    EXPECT_EQ(r.message.find('\n'), std::string::npos) << r.message;
    EXPECT_NE(r.message.find(c.says), std::string::npos) << r.message;
  }
}

TEST(TourOptions, HelpNamesTheRefusedFlagsNotAsOptions) {
  const auto r = parse({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.message.find("Not taken by tour:"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("--dtype is not taken here: the tour runs every chapter in its own "
                           "dtype"), std::string::npos) << r.message;
  EXPECT_EQ(r.message.find("--dtype TEXT"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("--seq-len"), std::string::npos);
}

TEST(TourOptions, TheFlagsThatMatterStillParse) {
  const auto r = parse({"--seq-len", "1024", "--batch", "1", "--iters", "5", "--seed", "7"});
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.options.seq_len, 1024);
  EXPECT_EQ(r.options.seed, 7u);
}

TEST(TourNoGpu, SaysNothingWasTimedAndNoCsvWritten) {
  const std::string note = tour::no_gpu_note("no CUDA GPU found (CUDA: cudaErrorNoDevice)", "tour.csv");
  EXPECT_EQ(note.rfind("No CUDA GPU found (CUDA: cudaErrorNoDevice).\n", 0), 0u) << note;
  EXPECT_NE(note.find("Nothing was run or timed, and tour.csv was not written"), std::string::npos)
      << note;
}

TEST(FitColumn, TextThatFitsIsPaddedToTheWidth) {
  EXPECT_EQ(ft::fit_column("online softmax", 16), "online softmax  ");
  EXPECT_EQ(ft::fit_column("exactly ten", 11), "exactly ten");
  // Widths count code points: "N×N" is 3 columns (4 bytes), padded as 3.
  EXPECT_EQ(ft::display_width("the N×N grid"), 12u);
  EXPECT_EQ(ft::fit_column("the N×N grid", 14), "the N×N grid  ");
}

// The tour's rows at its 44 columns. Chapter 01's text is 44 columns but 45 bytes ("×"):
// it fits, whole (printf's "%-44.44s" cut it to "memor"). Chapter 04's is cut after
// "micro-tiles", not inside "float4".
TEST(FitColumn, LongTextIsCutBetweenWordsWithAnEllipsis) {
  const std::string ch01 = "three kernels, the N×N grid in device memory";
  EXPECT_EQ(ft::fit_column(ch01, 44), ch01);
  const std::string ch04 = "fused, register-tiled: 8x8 micro-tiles, float4 shared-memory reads";
  EXPECT_EQ(ft::fit_column(ch04, 44), "fused, register-tiled: 8x8 micro-tiles…" + std::string(5, ' '));
  // The separator before the cut (comma, colon, dash, space) goes with it.
  EXPECT_EQ(ft::fit_column("grid_half with a warp — per row", 24), "grid_half with a warp…  ");
  EXPECT_EQ(ft::fit_column("tuned: the fastest", 8), "tuned…  ");
  EXPECT_EQ(ft::display_width(ft::fit_column(ch04, 30)), 30u);
}

TEST(FitColumn, OnlyAFirstWordWiderThanTheColumnIsCutInside) {
  EXPECT_EQ(ft::fit_column("split_tail_everywhere now", 8), "split_t…");
  EXPECT_EQ(ft::fit_column("anything", 0), "");
}

}  // namespace
