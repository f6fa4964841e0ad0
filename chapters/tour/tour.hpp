/// @file tour.hpp
/// @brief What the tour says apart from its tables: its command line (the shared flags, less
/// those that would change nothing in it) and its words without a GPU. Apart from main() so
/// that the CPU tests (test_tour_cpu.cpp) check them.
#pragma once

#include <cctype>
#include <string>

#include "harness/options.hpp"

namespace tour {

/// The tour's flags: the shared ones, less five it refuses saying why, since each step runs
/// in its own dtype, its one variant, after chapter 01, launched call by call, and prints
/// its totals.
inline ft::OptionSpec options() {
  ft::OptionSpec spec{"tour", "Flash attention, step by step: every chapter on one problem", {}, {}};
  spec.refused = {
      {"--dtype",
       "the tour runs every chapter in its own dtype (float32 on the CUDA cores, bf16 on the "
       "tensor cores); for another, run that chapter's program with --dtype, e.g. "
       "build/chapters/07_tensor_core_forward/ch07_tensor_core_forward --dtype fp16"},
      {"--variant",
       "the tour runs one variant a chapter, its step of the staircase; for another, run that "
       "chapter's program with --variant (its --help lists them), e.g. "
       "build/chapters/07_tensor_core_forward/ch07_tensor_core_forward --variant lazy_rescale"},
      {"--no-baseline", "chapter 01 is the tour's first step, the base of every speedup"},
      {"--graph",
       "the tour times every step launched call by call; to time one replayed from a CUDA "
       "graph, run that chapter's program with --graph"},
      {"--ledger-csv",
       "the tour prints each step's totals; for a chapter's per-kernel ledger, run that "
       "chapter's program with --ledger-csv"}};
  return spec;
}

/// What the tour says when `why` (gpu_available's words) kept it from running: nothing was
/// timed, and the CSV it was asked for (`csv`) was not written.
inline std::string no_gpu_note(std::string why, const std::string& csv) {
  if (!why.empty()) why[0] = char(std::toupper(static_cast<unsigned char>(why[0])));
  return why + ".\nNothing was run or timed, and " + csv +
         " was not written: the table above is the model's prediction only. Run the tour on a "
         "machine with an NVIDIA GPU to measure it and write " + csv + ".\n";
}

}  // namespace tour
