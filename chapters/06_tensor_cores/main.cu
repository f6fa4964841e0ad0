// Chapter 06: the unfused forward on the tensor cores.
//
// Build and run (from the repository root):
//   cmake --preset default && cmake --build build --target ch06_tensor_cores
//   ./build/chapters/06_tensor_cores/ch06_tensor_cores --help
//   ./build/chapters/06_tensor_cores/ch06_tensor_cores              # bf16, B=4 H=32 N=4096 d=64
//   ./build/chapters/06_tensor_cores/ch06_tensor_cores --dtype fp16 --head-dim 128 --causal
//   ./build/chapters/06_tensor_cores/ch06_tensor_cores --seq-len 16384 --batch 1 --heads 16 --head-dim 128
//
// What this step changes. Chapters 02 and 03 computed S = scale·Q·Kᵀ, the softmax and
// O = P·V as three float32 kernels on the CUDA cores, and the two products took most of the
// time. Here the same three kernels read and write bf16 or fp16 and the products run on the
// tensor cores (mma.sync.m16n8k16 fed by ldmatrix, accumulating in float32), an order of
// magnitude faster than chapter 02's; the softmax is chapter 03's online softmax with the
// row held in registers. What stays is the N×N grid in device memory, and now it sets the
// time: the ledger printed first (the grid's bytes over the copy bandwidth) is the forecast.
//
// Variants (--variant): grid_f32 keeps S in float32 in the grid (4 bytes a score), grid_half
// rounds S to the dtype (2 bytes); P is in the dtype in both. warp_rows is grid_half with a
// warp per softmax row for rows of up to 2048 scores (warp_softmax.cuh; try it with
// --seq-len 1024 --batch 16 --variant warp_rows). Needs an sm_80 GPU or newer.
// Without a GPU the program prints the ledger and exits with code 3.
#include "06_tensor_cores/tensor_cores.hpp"
#include "harness/program.hpp"

int main(int argc, char** argv) {
  ft::ProgramSpec spec;
  spec.program = "ch06_tensor_cores";
  spec.title = "Chapter 06: the unfused forward on the tensor cores";
  spec.forwards = ch06::forward_impls();
  return ft::run_program(argc, argv, spec);
}
