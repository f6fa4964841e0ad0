/**
 * @file flashtut.h
 * @brief The C API of libflashtut: every kernel the chapters teach, as plain functions over
 * device pointers and a CUDA stream, for PyTorch (through ctypes), other languages and the
 * comparison scripts.
 *
 * Conventions (docs/contracts.md has the whole contract):
 * - Q, O, dO, dQ: device pointers to `[batch, heads_q, len_q, head_dim]` tensors; K, V, dK,
 *   dV to `[batch, heads_kv, len_kv, head_dim]`; contiguous row-major, of the element type
 *   `problem.dtype` names (FT_DTYPE_*). lse: float32 `[batch, heads_q, len_q]`, natural-log
 *   log-sum-exp, whatever the dtype. Query head h reads key/value head h / (heads_q / heads_kv).
 * - `scale` 0 means 1/sqrt(head_dim). `causal` nonzero: key j visible to query i iff j <= i
 *   (FT_CAUSAL_TOP_LEFT) or iff j <= i + len_kv - len_q (FT_CAUSAL_BOTTOM_RIGHT); the two agree
 *   when len_q = len_kv. A query row that sees no key (bottom-right, len_q > len_kv) gets
 *   O = 0, lse = -inf, dQ = 0. An implementation that computes only len_q = len_kv, or only
 *   heads_kv = heads_q, refuses the rest with -1 and says so.
 * - Alignment: every pointer (tensors, lse, workspace) must be a multiple of
 *   FT_ALIGNMENT = 16 bytes, because the kernels move 16 bytes per load and store. Memory
 *   from cudaMalloc (256-byte aligned) and PyTorch's allocator qualifies; a view that starts
 *   inside a tensor may not. An unaligned pointer is refused with -1 before any launch,
 *   never a CUDA error (a misaligned access would poison the caller's whole CUDA context).
 * - Every tensor pointer and lse must be non-NULL; `workspace`: device memory of at least
 *   `<function>_workspace_bytes(problem)` bytes (may be NULL only when that is 0). A NULL
 *   where memory is needed is refused with -1, naming it. The functions allocate nothing.
 *   `*_workspace_bytes` returns FT_WORKSPACE_ERROR (SIZE_MAX) for a problem the function
 *   cannot run, with ft_last_error() set; 0 is a true answer (chapter 04 needs nothing).
 * - Every function validates the problem first (sizes >= 1, lengths <= 2^24, head_dim <= 1024,
 *   heads_q a multiple of heads_kv, batch·heads·len < 2^31 on both sides, so no byte count can
 *   overflow), then the head dim, dtype, lengths and heads the implementation supports, then
 *   the pointers; then it
 *   launches asynchronously on `stream` and returns 0 on success. Errors: -1 for a problem,
 *   pointer or GPU the function cannot serve (ft_last_error() says why, in one line), or a
 *   cudaError_t value (> 0) for a CUDA failure. No C++ exception ever crosses this API.
 * - Views (API version 3): ft_ch07_forward_strided and ft_ch08_backward_strided take, beside
 *   the pointers, an ft_layout: each tensor's strides, so that q, k and v can be views of a
 *   model's projection (`[batch, seq_len, 3, heads, head_dim]` seen as `[B, H, N, d]`) and O
 *   and the gradients can be written in the layout the model wants, with no copy. head_dim
 *   stays contiguous; every stride of a dimension longer than 1 must be a multiple of 16
 *   bytes (8 elements), none negative; the row stride below 2^31 elements, no dimension
 *   reaching past 2^60; an output's elements must not overlap. lse stays contiguous
 *   `[batch, heads, seq_len]`. A layout that breaks a rule is refused with -1 (after the
 *   problem's own checks, before the pointers').
 * - Chapters 01–05 compute in float32 only: any other dtype gets -1.
 * - The struct may grow: a caller checks ft_api_version() == FT_API_VERSION (or
 *   ft_problem_size() == sizeof(ft_problem)) before relying on its layout.
 */
#ifndef FLASHTUT_H
#define FLASHTUT_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Version of this header's structs and functions: 2 added ft_problem.dtype, 3 ft_layout and
 * the `*_strided` functions, 4 the two lengths, the two head counts and the causal alignment
 * of ft_problem. */
#define FT_API_VERSION 4
/** Every pointer passed to the library must be a multiple of this many bytes. */
#define FT_ALIGNMENT 16
/** What `*_workspace_bytes` returns for a problem the function cannot run. */
#define FT_WORKSPACE_ERROR SIZE_MAX

/** Element types of Q, K, V, O and the gradients (lse is always float32). */
enum ft_dtype {
  FT_DTYPE_FLOAT32 = 0, /**< IEEE single */
  FT_DTYPE_BF16 = 1,    /**< bfloat16 (8 exponent bits, 8 significant bits) */
  FT_DTYPE_FP16 = 2     /**< IEEE half (5 exponent bits, 11 significant bits) */
};

/** Where the causal mask's diagonal sits when len_q != len_kv (docs/contracts.md draws it). */
enum ft_causal_align {
  FT_CAUSAL_TOP_LEFT = 0,     /**< key j visible to query i iff j <= i (PyTorch SDPA's is_causal) */
  FT_CAUSAL_BOTTOM_RIGHT = 1  /**< iff j <= i + len_kv - len_q (FlashAttention's; a KV cache's) */
};

/** The shape of one attention problem (API version 4: the two sides apart). Self-attention
 * of B sequences of N tokens with H heads is {B, H, H, N, N, d, causal, 0, scale, dtype}. */
typedef struct ft_problem {
  int batch;         /**< B */
  int heads_q;       /**< H_q: query heads */
  int heads_kv;      /**< H_kv: key/value heads; heads_q a multiple of it (1: multi-query) */
  int len_q;         /**< N_q: queries per sequence */
  int len_kv;        /**< N_kv: keys (and values) per sequence */
  int head_dim;      /**< d */
  int causal;        /**< nonzero: causal mask */
  int causal_align;  /**< an ft_causal_align (matters only when causal and len_q != len_kv) */
  float scale;       /**< softmax scale; 0 = 1/sqrt(d) */
  int dtype;         /**< an ft_dtype: the element type of the tensors */
} ft_problem;

/** Where one tensor's rows are: element (b, h, n, c) of a `[batch, heads, len, head_dim]`
 * tensor is at b·batch + h·head + n·row + c, counted in elements (head_dim contiguous).
 * Contiguous `[B, H, N, d]`: batch = H·N·d, head = N·d, row = d. (API version 3) */
typedef struct ft_strides {
  int64_t batch; /**< elements from one batch to the next */
  int64_t head;  /**< from one head to the next */
  int64_t row;   /**< from one token (row) to the next */
} ft_strides;

/** The strides of every tensor a pass touches: a forward reads Q, K, V and writes O; a
 * backward reads Q, K, V, O, dO and writes dQ, dK, dV. (API version 3) */
typedef struct ft_layout {
  ft_strides Q, K, V, O, dO, dQ, dK, dV;
} ft_layout;

/** FT_API_VERSION of the library that was loaded (compare with the header's). */
int ft_api_version(void);
/** sizeof(ft_problem) in the library that was loaded. */
size_t ft_problem_size(void);

/** The message of the last failure in this thread ("" if none). */
const char* ft_last_error(void);

/** The signature every forward pass has. */
typedef int (*ft_forward_fn)(ft_problem problem, const void* Q, const void* K, const void* V,
                             void* O, float* lse, void* workspace, cudaStream_t stream);
/** The signature every backward pass has. */
typedef int (*ft_backward_fn)(ft_problem problem, const void* Q, const void* K, const void* V,
                              const void* O, const float* lse, const void* dO, void* dQ,
                              void* dK, void* dV, void* workspace, cudaStream_t stream);
/** The signature of every `*_workspace_bytes`. */
typedef size_t (*ft_workspace_fn)(ft_problem problem);

/* Forward passes: (problem, Q, K, V, O, lse, workspace, stream). */
#define FT_DECLARE_FORWARD(name)                                                          \
  size_t name##_workspace_bytes(ft_problem problem);                                     \
  int name(ft_problem problem, const void* Q, const void* K, const void* V, void* O,    \
           float* lse, void* workspace, cudaStream_t stream);

FT_DECLARE_FORWARD(ft_ch01_forward)             /**< 01: three kernels, S and P in the workspace */
FT_DECLARE_FORWARD(ft_ch02_forward)             /**< 02: shared-memory tiled products */
FT_DECLARE_FORWARD(ft_ch03_forward)             /**< 03: online softmax between the products */
FT_DECLARE_FORWARD(ft_ch04_forward_simple)      /**< 04: fused, a thread per query row */
FT_DECLARE_FORWARD(ft_ch04_forward)             /**< 04: fused, register-tiled (the fast one) */
FT_DECLARE_FORWARD(ft_ch05_forward_materialize) /**< 05: forward that keeps P for the baseline */
FT_DECLARE_FORWARD(ft_ch06_forward)             /**< 06: unfused on tensor cores; bf16/fp16, d 64/128 */
/** 07: FlashAttention-2's forward on the tensor cores; bf16 or fp16 only, head_dim 64 or
 * 128, an sm_80 GPU or newer (-1 with a message otherwise). */
FT_DECLARE_FORWARD(ft_ch07_forward)
/** ft_ch07_forward on views: the tensors where `layout` says (its Q, K, V, O; not NULL).
 * Workspace: ft_ch07_forward_workspace_bytes. */
int ft_ch07_forward_strided(ft_problem problem, const ft_layout* layout, const void* Q,
                            const void* K, const void* V, void* O, float* lse, void* workspace,
                            cudaStream_t stream);

/* Backward passes: (problem, Q, K, V, O, lse, dO, dQ, dK, dV, workspace, stream).
 * The workspace must be the one the paired forward used: ft_ch05_forward_materialize for
 * ft_ch05_backward_materialize (P lives there); any forward that wrote O and lse (e.g.
 * ft_ch04_forward) for the flash backwards, whose workspace is their own. */
#define FT_DECLARE_BACKWARD(name)                                                        \
  size_t name##_workspace_bytes(ft_problem problem);                                    \
  int name(ft_problem problem, const void* Q, const void* K, const void* V,            \
           const void* O, const float* lse, const void* dO, void* dQ, void* dK, void* dV, \
           void* workspace, cudaStream_t stream);

FT_DECLARE_BACKWARD(ft_ch05_backward_materialize) /**< 05: reads the stored P, N×N dP/dS */
FT_DECLARE_BACKWARD(ft_ch05_backward)             /**< 05: flash, recomputes P; dQ by atomics */
FT_DECLARE_BACKWARD(ft_ch05_backward_dq_pass)     /**< 05: flash, dQ in a second kernel */
FT_DECLARE_BACKWARD(ft_ch05_backward_bc128)       /**< 05: flash, 128 keys per block (d <= 64) */
/** 08: FlashAttention-2's backward on the tensor cores; bf16 or fp16, head_dim 64 or 128, sm_80+;
 * workspace: dQ's float32 accumulator and D (padded to 4 floats), and, non-causal, room for the
 * float32 dK and dV of up to 160 key tiles the kernel may cut (10.5 MB at d = 64, 21 MB at
 * d = 128; pair with ft_ch07_forward). */
FT_DECLARE_BACKWARD(ft_ch08_backward)
/** ft_ch08_backward on views: every tensor where `layout` says (not NULL). Workspace:
 * ft_ch08_backward_workspace_bytes. */
int ft_ch08_backward_strided(ft_problem problem, const ft_layout* layout, const void* Q,
                             const void* K, const void* V, const void* O, const float* lse,
                             const void* dO, void* dQ, void* dK, void* dV, void* workspace,
                             cudaStream_t stream);

/** Chapter 03's row softmax over `rows` rows of `cols` floats: variant 0 the safe three-pass
 * kernel, 1 the online one-read kernel. `in` and `out` need only float alignment (4 bytes):
 * the kernel falls back to scalar loads when they are not 16-byte aligned. */
int ft_ch03_row_softmax(int variant, const float* in, float* out, int64_t rows, int cols,
                        cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* FLASHTUT_H */
