// CPU tests of the shared command line: defaults, valid flags, and one-line errors with
// exit code 2 for everything a reader might mistype; and of the programs' body around it
// (program.hpp): their --help, the problem line, the words without a GPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "harness/options.hpp"
#include "harness/program.hpp"

namespace {

ft::ParseResult parse(std::vector<std::string> args) {
  std::vector<const char*> argv{"prog"};
  for (auto& a : args) argv.push_back(a.c_str());
  ft::OptionSpec spec{"prog", "test program", {"simple", "fast"}, {32, 64, 128}};
  return ft::parse_options(int(argv.size()), argv.data(), spec);
}

TEST(Options, Defaults) {
  const auto r = parse({});
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.options.batch, 4);
  EXPECT_EQ(r.options.heads, 32);
  EXPECT_EQ(r.options.seq_len, 4096);
  EXPECT_EQ(r.options.head_dim, 64);
  EXPECT_FALSE(r.options.causal);
  EXPECT_TRUE(r.options.verify);
  EXPECT_FALSE(r.options.graph) << "timed call by call unless --graph";
  EXPECT_EQ(r.options.variant, "all");
}

TEST(Options, AllFlags) {
  const auto r = parse({"--batch", "2", "--heads", "3", "--seq-len", "1000", "--head-dim", "128",
                        "--causal", "--iters", "5", "--warmup", "0", "--csv", "out.csv",
                        "--variant", "fast", "--seed", "9", "--no-verify", "--no-baseline",
                        "--ledger-csv", "l.csv", "--graph"});
  ASSERT_TRUE(r.ok) << r.message;
  const auto& o = r.options;
  EXPECT_EQ(o.batch, 2);
  EXPECT_EQ(o.heads, 3);
  EXPECT_EQ(o.seq_len, 1000);
  EXPECT_EQ(o.head_dim, 128);
  EXPECT_TRUE(o.causal);
  EXPECT_EQ(o.iters, 5);
  EXPECT_EQ(o.warmup, 0);
  EXPECT_EQ(o.csv, "out.csv");
  EXPECT_EQ(o.variant, "fast");
  EXPECT_EQ(o.seed, 9u);
  EXPECT_FALSE(o.verify);
  EXPECT_FALSE(o.baseline);
  EXPECT_EQ(o.ledger_csv, "l.csv");
  EXPECT_TRUE(o.graph);
  const auto p = o.problem();
  EXPECT_EQ(p.rows(), 2 * 3 * 1000);
  EXPECT_TRUE(p.causal);
}

// A --csv file written by an older build (other columns) is refused before anything runs,
// with exit code 2, rather than after the measurements, when the rows would be appended.
TEST(Options, CsvWithOtherColumnsIsRefusedUpFront) {
  const std::string path = ::testing::TempDir() + "ft_options_old_header.csv";
  {
    std::ofstream out(path);
    out << "chapter,variant,pass\n01,naive,forward\n";
  }
  const auto r = parse({"--csv", path});
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.message.find("has other columns"), std::string::npos) << r.message;
  std::remove(path.c_str());
  EXPECT_TRUE(parse({"--csv", path}).ok) << "a new file is taken";
}

// --variant takes one name or a comma-separated list of them; each must be a variant.
TEST(Options, VariantListsSelectEachNamedVariant) {
  const auto r = parse({"--variant", "fast,simple"});
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_TRUE(r.options.selects("fast"));
  EXPECT_TRUE(r.options.selects("simple"));
  EXPECT_FALSE(r.options.selects("all"));
  const auto one = parse({"--variant", "fast"});
  EXPECT_TRUE(one.options.selects("fast"));
  EXPECT_FALSE(one.options.selects("simple"));
  EXPECT_TRUE(parse({}).options.selects("simple"));  // the default, "all"
  const auto bad = parse({"--variant", "fast,turbo"});
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.message.find("unknown --variant 'turbo'"), std::string::npos) << bad.message;
  EXPECT_FALSE(parse({"--variant", "fast,"}).ok);  // an empty name is no variant
}

TEST(Options, HelpExitsZeroAndListsChoices) {
  const auto r = parse({"--help"});
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.message.find("--seq-len"), std::string::npos);
  EXPECT_NE(r.message.find("32, 64, 128"), std::string::npos);
  EXPECT_NE(r.message.find("simple"), std::string::npos);
}

struct BadCase {
  std::vector<std::string> args;
  std::string expect_in_message;
};

void PrintTo(const BadCase& c, std::ostream* os) {
  for (const auto& a : c.args) *os << a << ' ';
}

class BadOptions : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadOptions, OneLineErrorExitTwo) {
  const auto r = parse(GetParam().args);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.message.find('\n'), std::string::npos) << "one line: " << r.message;
  EXPECT_EQ(r.message.rfind("prog: error: ", 0), 0u) << r.message;
  EXPECT_NE(r.message.find(GetParam().expect_in_message), std::string::npos) << r.message;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadOptions,
    ::testing::Values(BadCase{{"--bogus"}, "--bogus"},
                      BadCase{{"--batch", "x"}, "--batch takes a whole number from 1 to 2147483647, got 'x'"},
                      BadCase{{"--batch", "0"}, "--batch takes a whole number from 1 to 2147483647, got '0'"},
                      BadCase{{"--heads", "-3"}, "--heads takes a whole number from 1 to 2147483647, got '-3'"},
                      BadCase{{"--seq-len", "0"}, "--seq-len takes a whole number from 1 to 16777216, got '0'"},
                      BadCase{{"--seq-len", "99999999"}, "--seq-len takes a whole number from 1 to 16777216"},
                      // Not an integer, or past what an int holds: still the flag, the value
                      // and the range (CLI11 alone said "Could not convert").
                      BadCase{{"--seq-len", "1e11"}, "--seq-len takes a whole number from 1 to 16777216, got '1e11'"},
                      BadCase{{"--seq-len", "4096.5"}, "got '4096.5'"},
                      BadCase{{"--batch", "99999999999"}, "--batch takes a whole number from 1 to 2147483647, got '99999999999'"},
                      BadCase{{"--head-dim", "64x"}, "--head-dim takes a whole number from 1 to 1024, got '64x'"},
                      BadCase{{"--len-kv", "0"}, "--len-kv takes a whole number from 1 to 16777216, got '0'"},
                      BadCase{{"--len-kv", "99999999"}, "--len-kv takes a whole number from 1 to 16777216"},
                      BadCase{{"--len-kv", ""}, "--len-kv takes a whole number from 1 to 16777216, got ''"},
                      BadCase{{"--heads-kv", "0"}, "--heads-kv takes a whole number from 1 to 2147483647, got '0'"},
                      // A negative seed is refused, not taken modulo 2^64.
                      BadCase{{"--seed", "-1"}, "--seed takes a whole number from 0 to 18446744073709551615, got '-1'"},
                      BadCase{{"--seed", "18446744073709551616"}, "--seed takes a whole number"},
                      // A file that cannot be written is named with the system's reason.
                      BadCase{{"--csv", "/nonexistent-ft-dir/out.csv"},
                              "--csv '/nonexistent-ft-dir/out.csv' cannot be written: No such file or directory"},
                      BadCase{{"--ledger-csv", "/nonexistent-ft-dir/l.csv"},
                              "--ledger-csv '/nonexistent-ft-dir/l.csv' cannot be written: No such file or directory"},
                      BadCase{{"--ledger-csv", "/"}, "--ledger-csv '/' cannot be written: Is a directory"},
                      BadCase{{"--heads", "32", "--heads-kv", "5"},
                              "heads_q must be a multiple of heads_kv"},
                      BadCase{{"--causal-align", "middle"}, "--causal-align 'middle'"},
                      // 2^31 query rows: the limit the C API enforces too (Problem::validate)
                      BadCase{{"--batch", "128", "--heads", "1", "--seq-len", "16777216"},
                              "2^31 - 1 query rows"},
                      BadCase{{"--dtype", "float64"}, "--dtype 'float64' is not a dtype"},
                      BadCase{{"--dtype", "bf16"}, "--dtype bf16 is not supported here"},
                      BadCase{{"--head-dim", "48"}, "supported: 32, 64, 128"},
                      BadCase{{"--iters", "0"}, "--iters takes a whole number from 1 to 2147483647, got '0'"},
                      BadCase{{"--warmup", "-1"}, "--warmup takes a whole number from 0 to 2147483647, got '-1'"},
                      BadCase{{"--variant", "turbo"}, "unknown --variant 'turbo'"},
                      BadCase{{"--variant", "all,turbo"}, "--variant all stands alone"},
                      BadCase{{"--seq-len"}, "seq-len"},
                      BadCase{{"extra"}, "extra"}));

TEST(Options, TheKeyValueSideDefaultsToTheQuerySide) {
  const ft::Problem p = parse({"--seq-len", "100", "--heads", "8"}).options.problem();
  EXPECT_EQ(p.len_kv, 100);
  EXPECT_EQ(p.heads_kv, 8);
  EXPECT_EQ(p.align, ft::CausalAlign::TopLeft);
  const ft::Problem q = parse({"--seq-len", "4", "--len-kv", "8192", "--heads", "32", "--heads-kv",
                               "8", "--causal", "--causal-align", "bottom-right"})
                            .options.problem();
  EXPECT_EQ(q.len_q, 4);
  EXPECT_EQ(q.len_kv, 8192);
  EXPECT_EQ(q.heads_kv, 8);
  EXPECT_EQ(q.align, ft::CausalAlign::BottomRight);
}

TEST(Options, DtypeDefaultsToTheFirstSupportedAndParses) {
  EXPECT_EQ(parse({}).options.dtype, ft::DType::Float32);
  ft::OptionSpec half{"p", "d", {}, {64}, {ft::DType::BFloat16, ft::DType::Float16}};
  std::vector<const char*> none{"p"};
  const auto r = ft::parse_options(1, none.data(), half);
  ASSERT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.options.dtype, ft::DType::BFloat16);
  std::vector<const char*> fp16{"p", "--dtype", "fp16"};
  const auto h = ft::parse_options(3, fp16.data(), half);
  ASSERT_TRUE(h.ok) << h.message;
  EXPECT_EQ(h.options.problem().dtype, ft::DType::Float16);
  EXPECT_EQ(h.options.problem().q_bytes(), size_t(4) * 32 * 4096 * 64 * 2);  // 2 B each
  std::vector<const char*> f32{"p", "--dtype", "float32"};
  EXPECT_EQ(ft::parse_options(3, f32.data(), half).exit_code, 2);
}

TEST(Options, AnyHeadDimWhenUnrestricted) {
  std::vector<const char*> argv{"p", "--head-dim", "48"};
  const auto r = ft::parse_options(3, argv.data(), ft::OptionSpec{"p", "d", {}, {}});
  EXPECT_TRUE(r.ok) << r.message;
  std::vector<const char*> bad{"p", "--head-dim", "2000"};
  EXPECT_EQ(ft::parse_options(3, bad.data(), ft::OptionSpec{"p", "d", {}, {}}).exit_code, 2);
}

TEST(Options, SeedsTakeTheWholeUnsignedRange) {
  EXPECT_EQ(parse({"--seed", "0"}).options.seed, 0u);
  EXPECT_EQ(parse({"--seed", "18446744073709551615"}).options.seed, 18446744073709551615u);
}

// Each variant's head dims: --help lists them by variant, and --head-dim must suit every
// variant --variant selects (chapter 05: materialize takes any d, the flash variants 32, 64, 128).
TEST(Options, HeadDimsByVariant) {
  ft::OptionSpec spec{"p", "d", {"materialize", "flash", "flash_sync"}, {}};
  spec.variant_head_dims = {{}, {32, 64, 128}, {32, 64, 128}};
  auto run = [&](std::vector<const char*> argv) {
    argv.insert(argv.begin(), "p");
    return ft::parse_options(int(argv.size()), argv.data(), spec);
  };
  const auto help = run({"--help"});
  EXPECT_NE(help.message.find("supported: materialize: 1 to 1024; flash, flash_sync: 32, 64, 128"),
            std::string::npos) << help.message;
  // Without --variant, the variants that take d run (the program skips the others).
  EXPECT_TRUE(run({"--head-dim", "48"}).ok);
  const auto named = run({"--head-dim", "48", "--variant", "materialize,flash"});
  EXPECT_EQ(named.exit_code, 2);
  EXPECT_NE(named.message.find("--head-dim 48 is not supported by variant flash (supported: "
                               "materialize: 1 to 1024; flash, flash_sync: 32, 64, 128; --variant "
                               "chooses which run)"), std::string::npos) << named.message;
  EXPECT_TRUE(run({"--head-dim", "48", "--variant", "materialize"}).ok);
  EXPECT_TRUE(run({"--head-dim", "128"}).ok);
  EXPECT_FALSE(run({"--head-dim", "48", "--variant", "materialize,flash_sync"}).ok);
}

// ---- The programs' body (program.hpp) around the command line --------------------------

std::vector<ft::KernelTraffic> one_kernel(const ft::Problem&) {
  return {{"made_up_kernel", 1e6, 1e6, 1e6, 1e6, 1e9, "a made-up kernel"}};
}
size_t no_workspace(const ft::Problem&) { return 0; }
void no_run(const ft::Problem&, const ft::ForwardArgs&, cudaStream_t) {}

/// A made-up forward for the programs' body: it is never run (these tests stop at --help, at
/// a flag, or, without a GPU, after the ledger).
ft::ForwardImpl made_up(const std::string& variant, std::vector<int> dims,
                        std::vector<ft::DType> dtypes = {ft::DType::Float32}) {
  return {"99", variant, "a made-up step", std::move(dims), no_workspace, no_run, one_kernel,
          std::move(dtypes)};
}

ft::ProgramSpec program(std::vector<ft::ForwardImpl> forwards) {
  ft::ProgramSpec spec;
  spec.program = "prog";
  spec.title = "Chapter 99";
  spec.forwards = std::move(forwards);
  return spec;
}

struct Ran {
  int code;
  std::string out, err;
};

Ran run_program(const ft::ProgramSpec& spec, std::vector<std::string> args) {
  args.insert(args.begin(), spec.program);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int code = ft::run_program(int(argv.size()), argv.data(), spec);
  std::string out = ::testing::internal::GetCapturedStdout();
  return {code, out, ::testing::internal::GetCapturedStderr()};
}

// Two implementations that share no head dim: --help lists each one's (it said "1 to 1024",
// as if any d would do, when the intersection was empty).
TEST(Program, HelpListsTheHeadDimsOfEachImplementation) {
  const ft::ProgramSpec spec = program({made_up("narrow", {64}), made_up("wide", {128})});
  const Ran r = run_program(spec, {"--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("supported: narrow: 64; wide: 128"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("1 to 1024"), std::string::npos) << r.out;
  const Ran named = run_program(spec, {"--head-dim", "128", "--variant", "narrow"});
  EXPECT_EQ(named.code, 2);
  EXPECT_NE(named.err.find("--head-dim 128 is not supported by variant narrow"), std::string::npos)
      << named.err;
  const Ran none = run_program(spec, {"--head-dim", "96"});
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("--head-dim 96 is not supported (supported: narrow: 64; wide: 128)"),
            std::string::npos) << none.err;
}

// Without --variant, a variant that does not take --head-dim is skipped and named; the
// others run (here, without a GPU, as far as their ledger).
TEST(Program, EveryVariantThatTakesTheHeadDimRuns) {
  const ft::ProgramSpec spec = program({made_up("narrow", {64}), made_up("wide", {128})});
  const Ran r = run_program(spec, {"--head-dim", "128"});
  EXPECT_NE(r.out.find("(variant narrow skipped: it takes d = 64 only)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("chapter 99 wide"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("chapter 99 narrow"), std::string::npos) << r.out;
  EXPECT_NE(r.code, 2) << r.err;
}

TEST(Program, NoGpuIsSaidFirstWithCudasWordsInParentheses) {
  std::string why;
  if (ft::gpu_available(&why)) GTEST_SKIP() << "a GPU is here: these are the words without one";
  EXPECT_EQ(why.rfind("no CUDA GPU found (CUDA: ", 0), 0u) << why;
  EXPECT_EQ(why.back(), ')') << why;
}

// Without a GPU a program prints the problem (its dtype once), the ledger, and says first
// that no GPU was found: exit 3.
TEST(Program, ProblemLineNamesTheDtypeOnceAndNoGpuIsSaid) {
  if (ft::gpu_available()) GTEST_SKIP() << "a GPU is here: the program would measure";
  const ft::ProgramSpec spec =
      program({made_up("half", {64}, {ft::DType::BFloat16, ft::DType::Float16})});
  const Ran r = run_program(spec, {"--batch", "1", "--heads", "2", "--seq-len", "64"});
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.out.find("Chapter 99\nB=1 H=2 N=64 d=64 non-causal, bf16, scale 1/sqrt(d)\n"),
            std::string::npos) << r.out;
  EXPECT_EQ(r.err.rfind("prog: no CUDA GPU found (CUDA: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("nothing was run or timed"), std::string::npos) << r.err;
}

}  // namespace
