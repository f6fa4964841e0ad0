// Chapter 03: the online softmax. Chapter 02's three passes over each row of the grid
// (max; sum of exp; normalize) become two: one read finds the maximum m and the sum l
// together, keeping both as running values (common/cuda_core/online_softmax.cuh), then one read
// normalizes. The products stay chapter 02's.
//
// After the attention rows the program runs a row-softmax benchmark on about 1 GiB of rows
// of --seq-len floats: chapter 02's three-pass softmax against the online one that keeps
// each row in registers and reads it once, both as a percentage of the device's copy
// bandwidth (the ceiling for a kernel that must read and write every byte once).
//
// Build and run (from the repository root):
//   cmake --build build --target ch03_online_softmax && ./build/chapters/03_online_softmax/ch03_online_softmax --help
//   ./build/chapters/03_online_softmax/ch03_online_softmax --seq-len 16384 --batch 1
#include "01_naive/naive.hpp"
#include "03_online_softmax/online_softmax.hpp"
#include "harness/program.hpp"

int main(int argc, char** argv) {
  ft::ProgramSpec spec;
  spec.program = "ch03_online_softmax";
  spec.title = "Chapter 03: the online softmax, max and sum in one read";
  spec.forwards = ch03::forward_impls();
  spec.baseline = {ch01::naive()};
  spec.extra = ch03::row_softmax_benchmark;
  return ft::run_program(argc, argv, spec);
}
