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
/* FT_CAPI_FORWARD_DECLARATIONS */

/* Backward passes: (problem, Q, K, V, O, lse, dO, dQ, dK, dV, workspace, stream). */
/* FT_CAPI_BACKWARD_DECLARATIONS */

#ifdef __cplusplus
}
#endif

#endif /* FLASHTUT_H */
