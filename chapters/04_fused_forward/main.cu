// Chapter 04: the fused forward kernel.
//
// Build and run (from the repository root):
//   cmake --preset default && cmake --build build --target ch04_fused_forward
//   ./build/chapters/04_fused_forward/ch04_fused_forward --help
//   ./build/chapters/04_fused_forward/ch04_fused_forward                  # B=4 H=32 N=4096 d=64
//   ./build/chapters/04_fused_forward/ch04_fused_forward --variant fast --causal
//
// What this step changes. Chapters 01–03 wrote the N×N score grid S (and P) to device
// memory and read it back, pass after pass. Here one kernel does everything: a block keeps
// Br query rows on chip, streams K/V tiles of Bc rows through shared memory, and folds each
// score tile into a running max m, sum l and output O with chapter 03's online softmax.
// S and P never leave the chip; O and the log-sum-exp are written once.
//
// Variants (--variant): `simple` (one thread per query row: the idea, plainly), `fast`
// (register-tiled 8×8 micro-tiles, the chapter's default), and `fast_<Br>x<Bc>`: the same
// kernel with other tile shapes, for timing.
#include "04_fused_forward/fused_forward.hpp"
#include "harness/program.hpp"

int main(int argc, char** argv) {
  ft::ProgramSpec spec;
  spec.program = "ch04_fused_forward";
  spec.title = "Chapter 04: the fused forward kernel";
  spec.forwards = ch04::forward_impls();
  return ft::run_program(argc, argv, spec);
}
