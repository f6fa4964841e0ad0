/// @file options.cpp
#include "harness/options.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <sstream>

#include "core/check.cuh"
#include "harness/table.hpp"  // csv_columns_differ

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

/// The flags CLI11 keeps as text: each is converted and checked after parsing, so that an
/// error names the flag, the value and what it takes (CLI11 alone says "Could not convert").
struct RawFlags {
  std::string batch, heads, heads_kv, seq_len, len_kv, head_dim, iters, warmup, seed;
  std::string align, dtype;
  bool no_verify = false, no_baseline = false;
};

/// `text` as a whole number in [lo, hi], into *out; else the error naming flag, value, range.
template <class T>
std::string to_whole(const std::string& flag, const std::string& text, T lo, T hi, T* out) {
  T v{};
  const char* end = text.data() + text.size();
  const auto [stop, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || stop != end || v < lo || v > hi)
    return flag + " takes a whole number from " + std::to_string(lo) + " to " +
           std::to_string(hi) + ", got '" + text + "'";
  *out = v;
  return "";
}

/// Converts every whole-number flag; the first error, or "". The ranges: sizes from 1 (0
/// describes no problem) up to what an int holds (Problem::validate then bounds the rows
/// B·H·N), the lengths and d up to Problem's limits, --warmup from 0 (no untimed run), the
/// seed any unsigned 64-bit number (a negative one is refused, not wrapped).
std::string convert_wholes(const RawFlags& raw, const CLI::App& app, Options& o) {
  constexpr int kInt = std::numeric_limits<int>::max();
  struct Flag {
    const char* name;
    const std::string& text;
    int lo, hi;
    int* to;
  };
  const Flag flags[] = {{"--batch", raw.batch, 1, kInt, &o.batch},
                        {"--heads", raw.heads, 1, kInt, &o.heads},
                        {"--heads-kv", raw.heads_kv, 1, kInt, &o.heads_kv},
                        {"--seq-len", raw.seq_len, 1, Problem::kMaxSeqLen, &o.seq_len},
                        {"--len-kv", raw.len_kv, 1, Problem::kMaxSeqLen, &o.len_kv},
                        {"--head-dim", raw.head_dim, 1, Problem::kMaxHeadDim, &o.head_dim},
                        {"--iters", raw.iters, 1, kInt, &o.iters},
                        {"--warmup", raw.warmup, 0, kInt, &o.warmup}};
  for (const Flag& f : flags) {
    // Left out, --heads-kv and --len-kv keep 0 ("the same as the query side").
    if (f.text.empty() && app.count(f.name) == 0) continue;
    const std::string error = to_whole(f.name, f.text, f.lo, f.hi, f.to);
    if (!error.empty()) return error;
  }
  return to_whole<uint64_t>("--seed", raw.seed, 0, std::numeric_limits<uint64_t>::max(), &o.seed);
}

/// Each variant's head dims, in the order of spec.variants (one unnamed entry when the
/// program has no variants); an empty list takes any d from 1 to 1024.
std::vector<std::vector<int>> dims_by_variant(const OptionSpec& spec) {
  if (spec.variants.empty()) return {spec.head_dims};
  if (spec.variant_head_dims.size() == spec.variants.size()) return spec.variant_head_dims;
  return std::vector<std::vector<int>>(spec.variants.size(), spec.head_dims);
}

std::string dims_text(const std::vector<int>& dims) {
  return dims.empty() ? "1 to " + std::to_string(Problem::kMaxHeadDim) : join(dims);
}

/// What --help and the errors say d may be: one list when every variant takes the same,
/// else each list after the variants that take it ("materialize: 1 to 1024; flash: 32, 64").
std::string supported_dims(const OptionSpec& spec) {
  const auto dims = dims_by_variant(spec);
  std::vector<std::vector<int>> lists;            // each distinct list, in order
  std::vector<std::vector<std::string>> takers;   // the variants that take it
  for (size_t i = 0; i < dims.size(); ++i) {
    const size_t k = size_t(std::find(lists.begin(), lists.end(), dims[i]) - lists.begin());
    if (k == lists.size()) {
      lists.push_back(dims[i]);
      takers.emplace_back();
    }
    // A forward and a backward may share a name: it is listed once.
    const std::string name = spec.variants.empty() ? "" : spec.variants[i];
    if (std::find(takers[k].begin(), takers[k].end(), name) == takers[k].end())
      takers[k].push_back(name);
  }
  if (lists.size() == 1) return dims_text(lists[0]);
  std::string s;
  for (size_t k = 0; k < lists.size(); ++k) {
    s += k ? "; " : "";
    for (size_t j = 0; j < takers[k].size(); ++j) s += (j ? ", " : "") + takers[k][j];
    s += ": " + dims_text(lists[k]);
  }
  return s;
}

/// "" when every variant --variant names computes o.head_dim, or, without --variant (all),
/// when one of them does (the program skips the others and says so); else the error.
std::string check_head_dim(const Options& o, const OptionSpec& spec) {
  const auto dims = dims_by_variant(spec);
  auto takes = [&](size_t i) {
    return dims[i].empty() || std::count(dims[i].begin(), dims[i].end(), o.head_dim) > 0;
  };
  if (o.variant == "all" && dims.size() > 1) {
    for (size_t i = 0; i < dims.size(); ++i)
      if (takes(i)) return "";
    return "--head-dim " + std::to_string(o.head_dim) + " is not supported (supported: " +
           supported_dims(spec) + ")";
  }
  for (size_t i = 0; i < dims.size(); ++i) {
    const bool selected = spec.variants.empty() || o.selects(spec.variants[i]);
    if (!selected || dims[i].empty() ||
        std::count(dims[i].begin(), dims[i].end(), o.head_dim) > 0)
      continue;
    const std::string d = "--head-dim " + std::to_string(o.head_dim);
    if (dims.size() == 1 || std::count(dims.begin(), dims.end(), dims[i]) == long(dims.size()))
      return d + " is not supported (supported: " + supported_dims(spec) + ")";
    return d + " is not supported by variant " + spec.variants[i] + " (supported: " +
           supported_dims(spec) + "; --variant chooses which run)";
  }
  return "";
}

const RefusedFlag* refused(const OptionSpec& spec, const std::string& flag) {
  for (const auto& r : spec.refused)
    if (r.flag == flag) return &r;
  return nullptr;
}

/// The first argument that is a flag the program refuses ("--dtype" or "--dtype=bf16"): its
/// error, or "".
std::string check_refused(int argc, const char* const* argv, const OptionSpec& spec) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    for (const auto& r : spec.refused)
      if (arg == r.flag || arg.rfind(r.flag + "=", 0) == 0)
        return r.flag + " is not taken by " + spec.program + ": " + r.why;
  }
  return "";
}

/// "" when the file a flag names (if any) can be written; else the error.
std::string check_writable(const std::string& flag, const std::string& path) {
  if (path.empty()) return "";
  const std::string why = why_unwritable(path);
  if (why.empty()) return "";
  return flag + " '" + path + "' cannot be written: " + why +
         " (name a file in a folder that exists and that you may write to)";
}

/// The shared flags, bound to `raw` and `o`; the sizes as text (convert_wholes).
void add_flags(CLI::App& app, const OptionSpec& spec, RawFlags& raw, Options& o) {
  app.set_help_flag("-h,--help", "print this help and exit");
  auto whole = [&](const std::string& names, std::string& text, int value, const std::string& help) {
    text = std::to_string(value);
    return app.add_option(names, text, help)->type_name("INT")->capture_default_str();
  };
  whole("--batch,-b", raw.batch, o.batch, "B, sequences in the batch");
  whole("--heads", raw.heads, o.heads, "H, attention heads (query heads)");
  app.add_option("--heads-kv", raw.heads_kv,
                 "key/value heads, a divisor of --heads (grouped-query; 1: multi-query); "
                 "default: --heads")->type_name("INT");
  whole("--seq-len,-n", raw.seq_len, o.seq_len, "N, tokens per sequence (queries)");
  app.add_option("--len-kv", raw.len_kv, "keys (and values) per sequence; default: --seq-len")
      ->type_name("INT");
  raw.align = causal_align_name(o.align);
  app.add_option("--causal-align", raw.align,
                 "where the causal diagonal sits when --len-kv differs from --seq-len: "
                 "top-left (key j visible to query i iff j <= i, PyTorch's is_causal) or "
                 "bottom-right (iff j <= i + len_kv - seq_len, FlashAttention's)")
      ->capture_default_str();
  whole("--head-dim,-d", raw.head_dim, o.head_dim,
        "d, the head dimension (supported: " + supported_dims(spec) + ")");
  raw.dtype = dtype_name(spec.dtypes.empty() ? DType::Float32 : spec.dtypes.front());
  if (!refused(spec, "--dtype"))
    app.add_option("--dtype", raw.dtype,
                   "element type of Q, K, V, O (supported: " + dtype_list(spec.dtypes) + ")")
        ->capture_default_str();
  app.add_flag("--causal", o.causal, "causal mask: query i sees keys j <= i");
  whole("--iters", raw.iters, o.iters, "timed repetitions (median reported)");
  whole("--warmup", raw.warmup, o.warmup, "untimed runs before timing");
  if (!refused(spec, "--graph"))
    app.add_flag("--graph", o.graph,
                 "time each run replayed from a CUDA graph, recorded once after the warm-up, "
                 "instead of launched from the host (the CSV's timing column: graph)");
  app.add_option("--csv", o.csv, "append result rows to this CSV file");
  std::string variants = "all";
  for (const auto& v : spec.variants) variants += ", " + v;
  if (!spec.variants.empty() && !refused(spec, "--variant"))
    app.add_option("--variant", o.variant, "run one variant, or several (a,b): " + variants)->capture_default_str();
  raw.seed = std::to_string(o.seed);
  app.add_option("--seed", raw.seed, "seed of the random inputs, 0 to 2^64 - 1")
      ->type_name("INT")->capture_default_str();
  app.add_flag("--no-verify", raw.no_verify, "skip the comparison with the float64 CPU reference");
  if (!refused(spec, "--no-baseline"))
    app.add_flag("--no-baseline", raw.no_baseline, "do not also time chapter 01 for the speedup");
  if (!refused(spec, "--ledger-csv"))
    app.add_option("--ledger-csv", o.ledger_csv, "write the traffic model's per-kernel ledger here");
  std::string footer;
  for (const auto& r : spec.refused) footer += "\n  " + r.flag + " is not taken here: " + r.why;
  if (!footer.empty()) app.footer("Not taken by " + spec.program + ":" + footer);
}

/// Everything CLI11 does not check: the texts converted, choices, sizes, files. "" or the error.
std::string validate(const RawFlags& raw, const CLI::App& app, const OptionSpec& spec, Options& o) {
  if (std::string e = convert_wholes(raw, app, o); !e.empty()) return e;
  o.verify = !raw.no_verify;
  o.baseline = !raw.no_baseline;
  if (raw.align == "top-left") o.align = CausalAlign::TopLeft;
  else if (raw.align == "bottom-right") o.align = CausalAlign::BottomRight;
  else return "--causal-align '" + raw.align + "' is not an alignment (top-left, bottom-right)";
  if (!parse_dtype(raw.dtype, &o.dtype))
    return "--dtype '" + raw.dtype + "' is not a dtype (float32, bf16, fp16)";
  if (std::find(spec.dtypes.begin(), spec.dtypes.end(), o.dtype) == spec.dtypes.end())
    return "--dtype " + raw.dtype + " is not supported here (supported: " +
           dtype_list(spec.dtypes) + ")";
  // The sizes together: the one validation the C API uses too (Problem::validate), so that
  // both refuse the same problems with the same words.
  try {
    o.problem().validate();
  } catch (const std::exception& e) {
    return e.what();
  }
  if (!spec.variants.empty() && o.variant != "all") {
    std::string all = "all";
    for (const auto& v : spec.variants) all += ", " + v;
    for (const auto& v : variant_list(o.variant)) {
      if (v == "all") return "--variant all stands alone: give it by itself, or list the variants";
      if (std::find(spec.variants.begin(), spec.variants.end(), v) == spec.variants.end())
        return "unknown --variant '" + v + "' (choose from: " + all + ")";
    }
  }
  if (std::string e = check_head_dim(o, spec); !e.empty()) return e;
  if (std::string e = check_writable("--csv", o.csv); !e.empty()) return e;
  if (std::string e = csv_columns_differ(o.csv); !e.empty()) return e;  // before any run, not after
  return check_writable("--ledger-csv", o.ledger_csv);
}
}  // namespace

bool Options::selects(const std::string& name) const {
  if (variant == "all") return true;
  const auto names = variant_list(variant);
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string why_unwritable(const std::string& path) {
  std::error_code ec;
  const bool existed = std::filesystem::exists(std::filesystem::symlink_status(path, ec));
  errno = 0;
  FILE* f = std::fopen(path.c_str(), "a");
  if (!f) return std::strerror(errno);
  std::fclose(f);
  if (!existed) std::remove(path.c_str());
  return "";
}

ParseResult parse_options(int argc, const char* const* argv, const OptionSpec& spec) {
  ParseResult r;
  auto fail = [&](const std::string& msg) {
    r.ok = false;
    r.exit_code = 2;
    r.message = spec.program + ": error: " + msg + " (see --help)";
    return r;
  };
  if (std::string e = check_refused(argc, argv, spec); !e.empty()) return fail(e);
  CLI::App app{spec.description, spec.program};
  RawFlags raw;
  add_flags(app, spec, raw, r.options);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    r.exit_code = 0;
    r.message = app.help();
    return r;
  } catch (const CLI::ParseError& e) {
    return fail(e.what());
  }
  if (std::string e = validate(raw, app, spec, r.options); !e.empty()) return fail(e);
  r.ok = true;
  return r;
}

}  // namespace ft
