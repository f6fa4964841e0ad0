/// @file options.hpp
/// @brief The command line every chapter's program shares (parsed with CLI11):
/// `--batch --heads --heads-kv --seq-len --len-kv --head-dim --dtype --causal --causal-align
/// --iters --warmup --graph --csv --variant --seed --no-verify --no-baseline --ledger-csv --help`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/problem.hpp"

namespace ft {

/// What a program was asked to do. Defaults: 16384 tokens as B=4 sequences of N=4096,
/// H=32 heads of d=64 (hidden size 2048), the shapes the FlashAttention papers benchmark.
struct Options {
  int batch = 4;
  int heads = 32;      ///< H_q
  int heads_kv = 0;    ///< H_kv; 0: the same as heads
  int seq_len = 4096;  ///< N_q
  int len_kv = 0;      ///< N_kv; 0: the same as seq_len
  CausalAlign align = CausalAlign::TopLeft;  ///< --causal-align top-left|bottom-right
  int head_dim = 64;
  bool causal = false;
  DType dtype = DType::Float32;  ///< --dtype float32|bf16|fp16
  int iters = 20;    ///< timed repetitions; the median is reported
  int warmup = 3;    ///< untimed runs first (module load, caches, clocks)
  bool graph = false;  ///< time each run as a CUDA graph's replay (time_on_gpu's `graph`)
  std::string csv;   ///< append result rows to this CSV file
  std::string variant = "all";  ///< run only this variant, or these (comma-separated)
  uint64_t seed = 2024;         ///< random inputs are a pure function of the seed
  bool verify = true;           ///< compare with the float64 CPU reference
  bool baseline = true;         ///< also time chapter 01 for the speedup column
  std::string ledger_csv;       ///< write the model's per-kernel ledger to this CSV file

  Problem problem() const;
  /// Whether --variant asks for this variant: "all", its name, or a list naming it.
  bool selects(const std::string& name) const;
};

/// A shared flag a program does not take, and why: given, it is refused with `why` (never
/// accepted and ignored); --help lists it under the flags with the same words.
struct RefusedFlag {
  std::string flag;  ///< its long name, "--dtype"
  std::string why;   ///< why not, and what to run instead
};

/// What a program accepts beyond the shared flags.
struct OptionSpec {
  std::string program;              ///< e.g. "ch01_naive"
  std::string description;          ///< one line for --help
  std::vector<std::string> variants;  ///< names accepted by --variant (plus "all")
  std::vector<int> head_dims;       ///< supported d; empty: any d from 1 to 1024
  std::vector<DType> dtypes = {DType::Float32};  ///< supported --dtype values
  /// Each variant's supported d, in the order of `variants` (an empty list: any d from 1 to
  /// 1024); --head-dim must suit every variant --variant names (without --variant, one of
  /// them: the program skips those that do not take it and says so). Left empty, every variant
  /// takes `head_dims`.
  std::vector<std::vector<int>> variant_head_dims = {};
  std::vector<RefusedFlag> refused = {};  ///< shared flags this program does not take
};

/// Outcome of parsing: either options, or help text (exit 0), or a one-line error (exit 2).
struct ParseResult {
  bool ok = false;       ///< options are valid: run
  int exit_code = 0;     ///< when !ok: 0 after --help, 2 on an error
  std::string message;   ///< help text or "program: error: …"
  Options options;
};

/// Parses and validates argv: every whole number in its flag's range, the files --csv and
/// --ledger-csv name writable (tried, and a file that was not there removed again). Never
/// exits and never prints: the caller decides.
ParseResult parse_options(int argc, const char* const* argv, const OptionSpec& spec);

/// Empty when the file `path` can be appended to, else why not, in the system's words
/// ("No such file or directory"). A file the check creates is removed again.
std::string why_unwritable(const std::string& path);

}  // namespace ft
