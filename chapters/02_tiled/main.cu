// Chapter 02: shared-memory tiling. The same three passes as chapter 01, each written to
// use the GPU well:
//
//   S = scale·Q·Kᵀ   tiled_matmul: a block computes a 64×64 tile of S, staging 64×16 slabs
//                     of Q and K in shared memory, each thread a 4×4 patch in registers
//   P = softmax(S)    a block of 256 threads per row, coalesced, warp-shuffle reductions
//   O = P·V           the same tiled_matmul
//
// Variants (--variant): `smem_tiles`, the products with 16×16 shared-memory tiles and one
// output a thread (the classic kernel), and `tiled`, the products above with their 4×4
// register patches (the kernel chapters 03 and 05 call). Both run the same softmax.
//
// What changes from chapter 01: Q, K and V are no longer fetched from device memory once
// per output element, and the softmax reads its rows coalesced. What does not: the N×N
// grid is still written, read three times, written again and read back.
//
// Build and run (from the repository root):
//   cmake --build build --target ch02_tiled && ./build/chapters/02_tiled/ch02_tiled --help
//   ./build/chapters/02_tiled/ch02_tiled --seq-len 4096 --head-dim 64
#include "01_naive/naive.hpp"
#include "02_tiled/tiled.hpp"
#include "harness/program.hpp"

int main(int argc, char** argv) {
  ft::ProgramSpec spec;
  spec.program = "ch02_tiled";
  spec.title = "Chapter 02: shared-memory tiling, a block per softmax row";
  spec.forwards = ch02::forward_impls();
  spec.baseline = {ch01::naive()};
  return ft::run_program(argc, argv, spec);
}
