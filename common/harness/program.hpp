/// @file program.hpp
/// @brief The body every chapter's main() shares: parse the flags, print the model's
/// ledger, then (with a GPU) verify and time each implementation and print the table.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "harness/harness.hpp"
#include "harness/options.hpp"

namespace ft {

struct ProgramSpec {
  std::string program;      ///< the executable's name, e.g. "ch02_tiled"
  std::string title;        ///< "Chapter 02: shared-memory tiling"
  std::vector<ForwardImpl> forwards;
  std::vector<BackwardImpl> backwards;
  /// Chapter 01's implementation, timed on the same problem for the speedup column (chapters
  /// 02+ set it; --no-baseline skips it, and it is skipped when its N×N grid won't fit).
  std::vector<ForwardImpl> baseline;
  /// Chapter-specific extra measurements (chapter 03's row-softmax benchmark), run after
  /// the attention rows when a GPU is present; may append rows.
  std::function<void(const Options&, std::vector<Row>&)> extra;
};

/// Exit codes: 0 ok; 1 a CUDA failure or wrong result; 2 bad flags, unsupported shape or
/// too large for the GPU; 3 no GPU (after printing the model's predictions).
int run_program(int argc, char** argv, const ProgramSpec& spec);

}  // namespace ft
