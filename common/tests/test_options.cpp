// CPU tests of the shared command line: defaults, valid flags, and one-line errors with
// exit code 2 for everything a reader might mistype.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "harness/options.hpp"

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
  EXPECT_EQ(r.options.variant, "all");
}

TEST(Options, AllFlags) {
  const auto r = parse({"--batch", "2", "--heads", "3", "--seq-len", "1000", "--head-dim", "128",
                        "--causal", "--iters", "5", "--warmup", "0", "--csv", "out.csv",
                        "--variant", "fast", "--seed", "9", "--no-verify", "--no-baseline",
                        "--ledger-csv", "l.csv"});
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
  const auto p = o.problem();
  EXPECT_EQ(p.rows(), 2 * 3 * 1000);
  EXPECT_TRUE(p.causal);
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
                      BadCase{{"--batch", "x"}, "batch"},
                      BadCase{{"--batch", "0"}, "batch must be >= 1"},
                      BadCase{{"--heads", "-3"}, "heads_q must be >= 1"},
                      BadCase{{"--seq-len", "0"}, "len_q must be in"},
                      BadCase{{"--seq-len", "99999999"}, "len_q must be in"},
                      BadCase{{"--len-kv", "0"}, "--len-kv must be >= 1"},
                      BadCase{{"--len-kv", "99999999"}, "len_kv must be in"},
                      BadCase{{"--heads-kv", "0"}, "--heads-kv must be >= 1"},
                      BadCase{{"--heads", "32", "--heads-kv", "5"},
                              "heads_q must be a multiple of heads_kv"},
                      BadCase{{"--causal-align", "middle"}, "--causal-align 'middle'"},
                      // 2^31 query rows: the limit the C API enforces too (Problem::validate)
                      BadCase{{"--batch", "128", "--heads", "1", "--seq-len", "16777216"},
                              "2^31 - 1 query rows"},
                      BadCase{{"--dtype", "float64"}, "--dtype 'float64' is not a dtype"},
                      BadCase{{"--dtype", "bf16"}, "--dtype bf16 is not supported here"},
                      BadCase{{"--head-dim", "48"}, "supported: 32, 64, 128"},
                      BadCase{{"--iters", "0"}, "--iters must be >= 1"},
                      BadCase{{"--warmup", "-1"}, "--warmup"},
                      BadCase{{"--variant", "turbo"}, "unknown --variant 'turbo'"},
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

}  // namespace
