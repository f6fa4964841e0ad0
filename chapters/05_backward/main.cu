// Chapter 05: the backward pass, two ways (float32, CUDA cores).
//
// Build and run (from the repository root):
//   cmake --preset default && cmake --build build --target ch05_backward
//   ./build/chapters/05_backward/ch05_backward --help
//   ./build/chapters/05_backward/ch05_backward --seq-len 4096 --head-dim 64 --causal
//
// What this chapter changes: training needs dQ, dK and dV. The baseline ("materialize")
// keeps the N×N probabilities P from its forward pass and runs the backward as four matrix
// products and dS over N×N grids (P, dP, dS), O(N²) extra memory. The flash backward keeps only O
// and the log-sum-exp L from chapter 04's forward and recomputes P tile by tile on chip
// ("flash": dQ summed with atomicAdd; "flash_dq_pass": dQ from a second kernel, no
// atomics): O(N) extra memory, and the N×N grids never reach device memory.
// "flash_sync" is "flash" with plain loads instead of cp.async (what the overlapped copy
// of the next query tile buys), "flash_bc128" "flash" with 128 keys a block.
// Every variant is verified against the float64 CPU reference before it is timed.
#include "05_backward/backward.hpp"
#include "harness/program.hpp"

int main(int argc, char** argv) {
  ft::ProgramSpec spec;
  spec.program = "ch05_backward";
  spec.title = "Chapter 05: the backward pass (store P, or recompute it)";
  spec.backwards = ch05::backward_impls();
  return ft::run_program(argc, argv, spec);
}
