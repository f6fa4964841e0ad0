// Chapter 01: naive attention, three kernels with the N×N score grid in device memory.
//
//   S = scale·Q·Kᵀ   one thread per element of S, dot products straight from device memory
//   P = softmax(S)    one thread per row: max, sum of exp, normalize (three passes)
//   O = P·V           one thread per element of O
//
// This is the baseline: every later chapter reports its speedup over it. The program
// prints the memory ledger (what each kernel reads and writes), then, with a GPU, checks
// the result against a float64 CPU reference and times it.
//
// Build and run (from the repository root):
//   cmake --build build --target ch01_naive && ./build/chapters/01_naive/ch01_naive --help
//   ./build/chapters/01_naive/ch01_naive --seq-len 4096 --head-dim 64 --causal
#include "01_naive/naive.hpp"
#include "harness/program.hpp"

int main(int argc, char** argv) {
  ft::ProgramSpec spec;
  spec.program = "ch01_naive";
  spec.title = "Chapter 01: naive attention, three kernels through device memory";
  spec.forwards = ch01::forward_impls();
  return ft::run_program(argc, argv, spec);
}
