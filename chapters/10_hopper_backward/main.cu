// Chapter 10: the backward on Hopper's own instructions (wgmma first), each step one idea.
//
// Build and run (from the repository root):
//   cmake --preset default && cmake --build build --target ch10_hopper_backward
//   ./build/chapters/10_hopper_backward/ch10_hopper_backward --help
//   ./build/chapters/10_hopper_backward/ch10_hopper_backward --head-dim 128 --causal
//
// Needs an H100 or H200 (sm_90): its kernels are sm_90a machine code, which no other GPU
// runs. Elsewhere it says so and exits.
#include "10_hopper_backward/hopper_backward.hpp"
#include "harness/program.hpp"

int main(int argc, char** argv) {
  ft::ProgramSpec spec;
  spec.program = "ch10_hopper_backward";
  spec.title = "Chapter 10: the backward on Hopper's instructions";
  spec.backwards = ch10::backward_impls();
  return ft::run_program(argc, argv, spec);
}
