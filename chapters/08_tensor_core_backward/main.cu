// Chapter 08: the backward pass on the tensor cores (FlashAttention-2's algorithm).
//
// Build and run (from the repository root):
//   cmake --preset default && cmake --build build --target ch08_tensor_core_backward
//   ./build/chapters/08_tensor_core_backward/ch08_tensor_core_backward --help
//   ./build/chapters/08_tensor_core_backward/ch08_tensor_core_backward              # bf16, B=4 H=32 N=4096 d=64
//   ./build/chapters/08_tensor_core_backward/ch08_tensor_core_backward --dtype fp16 --head-dim 128 --causal
//
// What this step changes. Chapter 05's flash backward ran its five products on the CUDA
// cores in float32; here they run on the tensor cores (mma.sync, bf16/fp16 operands,
// float32 accumulators). The new pieces are the transposed products — each warp computes
// the scores transposed, Sᵀ = K·Qᵀ, so that Pᵀ and dSᵀ come out of the accumulators already
// in the A-operand layout of dV += Pᵀ·dO and dK += dSᵀ·Q, while dQ = dS·K reads dS back
// from shared memory with ldmatrix.trans — and dQ's float32 accumulator, summed by atomics
// over the key blocks and rounded once at the end. Needs an sm_80 GPU or newer.
#include "08_tensor_core_backward/tensor_core_backward.hpp"
#include "harness/program.hpp"

int main(int argc, char** argv) {
  ft::ProgramSpec spec;
  spec.program = "ch08_tensor_core_backward";
  spec.title = "Chapter 08: the backward pass on the tensor cores";
  spec.backwards = ch08::backward_impls();
  return ft::run_program(argc, argv, spec);
}
