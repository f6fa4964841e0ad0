// Chapter 09: the fused forward on Hopper's own instructions (wgmma, then TMA, warp
// specialization and the overlaps), each step one idea.
//
// Build and run (from the repository root):
//   cmake --preset default && cmake --build build --target ch09_hopper_forward
//   ./build/chapters/09_hopper_forward/ch09_hopper_forward --help
//   ./build/chapters/09_hopper_forward/ch09_hopper_forward --head-dim 128 --causal
//
// Needs an H100 or H200 (sm_90): its kernels are sm_90a machine code, which no other GPU
// runs. Elsewhere it says so and exits.
#include "09_hopper_forward/hopper_forward.hpp"
#include "harness/program.hpp"

int main(int argc, char** argv) {
  ft::ProgramSpec spec;
  spec.program = "ch09_hopper_forward";
  spec.title = "Chapter 09: the fused forward on Hopper's instructions";
  spec.forwards = ch09::forward_impls();
  return ft::run_program(argc, argv, spec);
}
