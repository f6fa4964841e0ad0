/// @file options.cpp
#include "harness/options.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <sstream>

#include "core/check.cuh"

namespace ft {

Problem Options::problem() const {
  return with_kv(make_problem(batch, heads, seq_len, head_dim, causal, dtype),
                 len_kv > 0 ? len_kv : seq_len, heads_kv > 0 ? heads_kv : heads, align);
}

namespace {
std::string join(const std::vector<int>& v) {
  std::ostringstream s;
  for (size_t i = 0; i < v.size(); ++i) s << (i ? ", " : "") << v[i];
  return s.str();
}

/// "a,b,c" as {"a", "b", "c"} ("a," as {"a", ""}: no name is lost, an empty one is refused).
std::vector<std::string> variant_list(const std::string& names) {
  std::vector<std::string> out{""};
  for (char c : names) {
    if (c == ',')
      out.emplace_back();
    else
      out.back().push_back(c);
  }
  return out;
}
}  // namespace

bool Options::selects(const std::string& name) const {
  if (variant == "all") return true;
  const auto names = variant_list(variant);
  return std::find(names.begin(), names.end(), name) != names.end();
}

ParseResult parse_options(int argc, const char* const* argv, const OptionSpec& spec) {
  ParseResult r;
  Options& o = r.options;
  CLI::App app{spec.description, spec.program};
  app.set_help_flag("-h,--help", "print this help and exit");
  app.add_option("--batch,-b", o.batch, "B, sequences in the batch")->capture_default_str();
  app.add_option("--heads", o.heads, "H, attention heads (query heads)")->capture_default_str();
  CLI::Option* heads_kv_opt = app.add_option("--heads-kv", o.heads_kv,
                 "key/value heads, a divisor of --heads (grouped-query; 1: multi-query); "
                 "default: --heads");
  app.add_option("--seq-len,-n", o.seq_len, "N, tokens per sequence (queries)")->capture_default_str();
  CLI::Option* len_kv_opt = app.add_option("--len-kv", o.len_kv, "keys (and values) per sequence; default: --seq-len");
  std::string align_arg = causal_align_name(o.align);
  app.add_option("--causal-align", align_arg,
                 "where the causal diagonal sits when --len-kv differs from --seq-len: "
                 "top-left (key j visible to query i iff j <= i, PyTorch's is_causal) or "
                 "bottom-right (iff j <= i + len_kv - seq_len, FlashAttention's)")
      ->capture_default_str();
  std::string dims = spec.head_dims.empty() ? "1 to 1024" : join(spec.head_dims);
  app.add_option("--head-dim,-d", o.head_dim, "d, the head dimension (supported: " + dims + ")")
      ->capture_default_str();
  std::string dtype_arg = dtype_name(spec.dtypes.empty() ? DType::Float32 : spec.dtypes.front());
  app.add_option("--dtype", dtype_arg,
                 "element type of Q, K, V, O (supported: " + dtype_list(spec.dtypes) + ")")
      ->capture_default_str();
  app.add_flag("--causal", o.causal, "causal mask: query i sees keys j <= i");
  app.add_option("--iters", o.iters, "timed repetitions (median reported)")->capture_default_str();
  app.add_option("--warmup", o.warmup, "untimed runs before timing")->capture_default_str();
  app.add_option("--csv", o.csv, "append result rows to this CSV file");
  std::string variants = "all";
  for (const auto& v : spec.variants) variants += ", " + v;
  if (!spec.variants.empty())
    app.add_option("--variant", o.variant, "run one variant, or several (a,b): " + variants)->capture_default_str();
  app.add_option("--seed", o.seed, "seed of the random inputs")->capture_default_str();
  bool no_verify = false, no_baseline = false;
  app.add_flag("--no-verify", no_verify, "skip the comparison with the float64 CPU reference");
  app.add_flag("--no-baseline", no_baseline, "do not also time chapter 01 for the speedup");
  app.add_option("--ledger-csv", o.ledger_csv, "write the traffic model's per-kernel ledger here");

  auto fail = [&](const std::string& msg) {
    r.ok = false;
    r.exit_code = 2;
    r.message = spec.program + ": error: " + msg + " (see --help)";
    return r;
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    r.exit_code = 0;
    r.message = app.help();
    return r;
  } catch (const CLI::ParseError& e) {
    return fail(e.what());
  }
  o.verify = !no_verify;
  o.baseline = !no_baseline;

  if (align_arg == "top-left") o.align = CausalAlign::TopLeft;
  else if (align_arg == "bottom-right") o.align = CausalAlign::BottomRight;
  else return fail("--causal-align '" + align_arg + "' is not an alignment (top-left, bottom-right)");
  // Given, they must be real sizes (left out, 0 stands for "the same as the query side").
  if (heads_kv_opt->count() && o.heads_kv < 1)
    return fail("--heads-kv must be >= 1, got " + std::to_string(o.heads_kv));
  if (len_kv_opt->count() && o.len_kv < 1)
    return fail("--len-kv must be >= 1, got " + std::to_string(o.len_kv));
  if (!parse_dtype(dtype_arg, &o.dtype))
    return fail("--dtype '" + dtype_arg + "' is not a dtype (float32, bf16, fp16)");
  if (std::find(spec.dtypes.begin(), spec.dtypes.end(), o.dtype) == spec.dtypes.end())
    return fail("--dtype " + dtype_arg + " is not supported here (supported: " +
                dtype_list(spec.dtypes) + ")");
  // The sizes: the one validation the C API uses too (Problem::validate), so that both
  // refuse the same problems with the same words.
  try {
    o.problem().validate();
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  const bool dim_ok = spec.head_dims.empty()
                          ? (o.head_dim >= 1 && o.head_dim <= 1024)
                          : std::count(spec.head_dims.begin(), spec.head_dims.end(), o.head_dim) > 0;
  if (!dim_ok)
    return fail("--head-dim " + std::to_string(o.head_dim) + " is not supported (supported: " +
                dims + ")");
  if (o.iters < 1) return fail("--iters must be >= 1, got " + std::to_string(o.iters));
  if (o.warmup < 0) return fail("--warmup must be >= 0, got " + std::to_string(o.warmup));
  if (!spec.variants.empty() && o.variant != "all")
    for (const auto& v : variant_list(o.variant))
      if (std::find(spec.variants.begin(), spec.variants.end(), v) == spec.variants.end())
        return fail("unknown --variant '" + v + "' (choose from: " + variants + ")");
  r.ok = true;
  return r;
}

}  // namespace ft
