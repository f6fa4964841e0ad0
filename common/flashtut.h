/**
 * @file flashtut.h
 * @brief The C API of libflashtut: every kernel the chapters teach, as plain functions over
 * device pointers and a CUDA stream, for PyTorch (through ctypes), other languages and the
 * comparison scripts.
 *
 * Conventions (the design guide's contracts):
 * - Q, K, V, O, dO, dQ, dK, dV: float32 device pointers, `[batch, heads, seq_len, head_dim]`,
 *   contiguous row-major. lse: float32 `[batch, heads, seq_len]`, natural-log log-sum-exp.
 * - `scale` 0 means 1/sqrt(head_dim). `causal` nonzero: key j visible to query i iff j <= i.
 * - `workspace`: device memory of at least `<function>_workspace_bytes(problem)` bytes
 *   (may be NULL when that is 0). The functions allocate nothing themselves.
 * - Every function launches asynchronously on `stream` and returns 0 on success, or a
 *   nonzero code: a cudaError_t value for a CUDA failure, -1 for an unsupported problem
 *   (ft_last_error() then says why, in one line).
 */
#ifndef FLASHTUT_H
#define FLASHTUT_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The shape of one attention problem. */
typedef struct ft_problem {
  int batch;     /**< B */
  int heads;     /**< H */
  int seq_len;   /**< N (queries and keys) */
  int head_dim;  /**< d */
  int causal;    /**< nonzero: causal mask */
  float scale;   /**< softmax scale; 0 = 1/sqrt(d) */
} ft_problem;

/** The message of the last failure in this thread ("" if none). */
const char* ft_last_error(void);

/* Forward passes: (problem, Q, K, V, O, lse, workspace, stream). */
#define FT_DECLARE_FORWARD(name)                                                          \
  size_t name##_workspace_bytes(ft_problem problem);                                     \
  int name(ft_problem problem, const float* Q, const float* K, const float* V, float* O, \
           float* lse, void* workspace, cudaStream_t stream);

FT_DECLARE_FORWARD(ft_ch01_forward)             /**< 01: three kernels, S and P in the workspace */
FT_DECLARE_FORWARD(ft_ch02_forward)             /**< 02: shared-memory tiled products */
FT_DECLARE_FORWARD(ft_ch03_forward)             /**< 03: online softmax between the products */
FT_DECLARE_FORWARD(ft_ch04_forward_simple)      /**< 04: fused, a thread per query row */
FT_DECLARE_FORWARD(ft_ch04_forward)             /**< 04: fused, register-tiled (the fast one) */
FT_DECLARE_FORWARD(ft_ch05_forward_materialize) /**< 05: forward that keeps P for the baseline */

/* Backward passes: (problem, Q, K, V, O, lse, dO, dQ, dK, dV, workspace, stream).
 * The workspace must be the one the paired forward used: ft_ch05_forward_materialize for
 * ft_ch05_backward_materialize (P lives there); any forward that wrote O and lse (e.g.
 * ft_ch04_forward) for the flash backwards, whose workspace is their own. */
#define FT_DECLARE_BACKWARD(name)                                                        \
  size_t name##_workspace_bytes(ft_problem problem);                                    \
  int name(ft_problem problem, const float* Q, const float* K, const float* V,         \
           const float* O, const float* lse, const float* dO, float* dQ, float* dK,     \
           float* dV, void* workspace, cudaStream_t stream);

FT_DECLARE_BACKWARD(ft_ch05_backward_materialize) /**< 05: reads the stored P, N×N dP/dS */
FT_DECLARE_BACKWARD(ft_ch05_backward)             /**< 05: flash, recomputes P; dQ by atomics */
FT_DECLARE_BACKWARD(ft_ch05_backward_dq_pass)     /**< 05: flash, dQ in a second kernel */
FT_DECLARE_BACKWARD(ft_ch05_backward_bc128)       /**< 05: flash, 128 keys per block (d <= 64) */

/** Chapter 03's row softmax over `rows` rows of `cols` floats: variant 0 the safe three-pass
 * kernel, 1 the online one-read kernel. */
int ft_ch03_row_softmax(int variant, const float* in, float* out, int64_t rows, int cols,
                        cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* FLASHTUT_H */
