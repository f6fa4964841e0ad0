// Chapter 07: the fused forward on the tensor cores (FlashAttention-2's algorithm).
//
// Build and run (from the repository root):
//   cmake --preset default && cmake --build build --target ch07_tensor_core_forward
//   ./build/chapters/07_tensor_core_forward/ch07_tensor_core_forward --help
//   ./build/chapters/07_tensor_core_forward/ch07_tensor_core_forward              # bf16, B=4 H=32 N=4096 d=64
//   ./build/chapters/07_tensor_core_forward/ch07_tensor_core_forward --dtype fp16 --head-dim 128 --causal
//
// What this step changes. Chapter 04 fused the forward on the CUDA cores, where arithmetic
// set the time. Here the two products run on the tensor cores (mma.sync, chapter 06's
// instruments), more than ten times faster, and the fusing is what keeps them fed: the
// scores never leave the registers, and P goes from the accumulators of S = Q·Kᵀ straight
// into the A operand of O += P·V.
//
// Variants (--variant): plain, padded, swizzled, async, tuned, lazy_rescale (the staircase,
// one idea each; see flash_forward.cu), fastest, and the tile shapes the tuning measured. Needs an sm_80 GPU or newer.
#include "07_tensor_core_forward/flash_forward.hpp"
#include "harness/program.hpp"

int main(int argc, char** argv) {
  ft::ProgramSpec spec;
  spec.program = "ch07_tensor_core_forward";
  spec.title = "Chapter 07: the fused forward on the tensor cores";
  spec.forwards = ch07::forward_impls();
  return ft::run_program(argc, argv, spec);
}
