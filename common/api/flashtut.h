/**
 * @file flashtut.h
 * @brief The C API of libflashtut: every kernel the chapters teach, by name, as plain
 * functions over device pointers and a CUDA stream, for PyTorch (through ctypes), other
 * languages and the comparison scripts.
 *
 * The library knows its implementations from the registry every chapter adds to
 * (common/harness/registry.hpp): ft_impl_count() and ft_impl_info_at() list them (name, pass,
 * dtypes, head dims, features, the GPU they need), and ft_forward("ch07_fastest", ...) or
 * ft_backward("ch08", ...) runs one by its name or its chapter's alias.
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
 *   ft_forward_workspace_bytes(impl, problem) (or the backward's) bytes (may be NULL only
 *   when that is 0). A NULL
 *   where memory is needed is refused with -1, naming it. The functions allocate nothing.
 *   The workspace queries return FT_WORKSPACE_ERROR (SIZE_MAX) for a problem the
 *   implementation cannot run, with ft_last_error() set; 0 is a true answer (chapter 04
 *   needs nothing).
 * - Every function validates the problem first (sizes >= 1, lengths <= 2^24, head_dim <= 1024,
 *   heads_q a multiple of heads_kv, batch·heads·len < 2^31 on both sides, so no byte count can
 *   overflow), then the head dim, dtype, lengths and heads the implementation supports, then
 *   the pointers; then it
 *   launches asynchronously on `stream` and returns 0 on success. Errors: -1 for a problem,
 *   pointer or GPU the function cannot serve (ft_last_error() says why, in one line), or a
 *   cudaError_t value (> 0) for a CUDA failure; with no GPU at all, the code CUDA gave
 *   (cudaErrorNoDevice where it counted none) and a message that starts "no CUDA GPU found".
 *   No C++ exception ever crosses this API.
 * - Views (API version 3): ft_forward_strided and ft_backward_strided take, beside the
 *   pointers, an ft_layout, for the implementations whose info says `strided`: each tensor's strides, so that q, k and v can be views of a
 *   model's projection (`[batch, seq_len, 3, heads, head_dim]` seen as `[B, H, N, d]`) and O
 *   and the gradients can be written in the layout the model wants, with no copy. head_dim
 *   stays contiguous; every stride of a dimension longer than 1 must be a multiple of 16
 *   bytes (8 elements), none negative; the row stride below 2^31 elements, no dimension
 *   reaching past 2^60; an output's elements must not overlap. lse stays contiguous
 *   `[batch, heads_q, len_q]`. A layout that breaks a rule is refused with -1 (after the
 *   problem's own checks, before the pointers').
 * - Each implementation computes the dtypes and head dims its info lists (chapters 01–05
 *   float32 only): anything else gets -1.
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
 * of ft_problem, and the implementations by name from the registry (ft_impl_info, ft_forward,
 * ft_backward) in place of one function per implementation. */
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

/** One implementation as the registry lists it (common/harness/registry.hpp): every chapter
 * registers its own, and this list is how a caller learns what the library has. The strings
 * live as long as the library is loaded. (API version 4) */
typedef struct ft_impl_info {
  const char* name;        /**< "ch07_fastest": ch<chapter>_<variant>, as the results files name it */
  const char* alias;       /**< "ch07" for the chapter's recommended forward or backward, else "" */
  const char* pass;        /**< "forward" or "backward" */
  const char* chapter;     /**< "07" */
  const char* variant;     /**< "fastest" */
  const char* what;        /**< what this step changes, one line */
  const char* pairs_with;  /**< a backward: the forward whose O and lse (and, for the
                                materializing baseline, workspace) it reads; "" for a forward */
  unsigned dtypes;         /**< bit 1 << FT_DTYPE_x for each element type it computes in */
  int head_dims[8];        /**< the head dimensions it computes (num_head_dims of them) */
  int num_head_dims;       /**< 0: any head_dim from 1 to 1024 */
  int min_sm;              /**< the compute capability it needs, ×10 (80: sm_80); 0: any */
  int lengths;             /**< nonzero: computes len_q != len_kv (either causal alignment) */
  int grouped;             /**< nonzero: computes heads_kv < heads_q */
  int strided;             /**< nonzero: takes views (ft_forward_strided, ft_backward_strided) */
  int tour;                /**< nonzero: a step of the tour's staircase (in this list's order) */
} ft_impl_info;

/** How many implementations the library registers (forwards first, then backwards). */
int ft_impl_count(void);
/** Fills `info` for implementation `index` (0 <= index < ft_impl_count()); -1 otherwise. */
int ft_impl_info_at(int index, ft_impl_info* info);

/* The passes, by name: `impl` is a forward's (or a backward's) name or alias from the list.
 * An unknown name is refused with -1 (FT_WORKSPACE_ERROR from the workspace queries), and
 * ft_last_error() lists the names there are. */

/** The workspace bytes forward `impl` needs for `problem` (0 is a true answer), or
 * FT_WORKSPACE_ERROR for a problem it cannot run, with ft_last_error() set. */
size_t ft_forward_workspace_bytes(const char* impl, ft_problem problem);
/** Forward: O and lse from Q, K, V. Queued on `stream`; 0, -1 (refused) or a cudaError_t. */
int ft_forward(const char* impl, ft_problem problem, const void* Q, const void* K,
               const void* V, void* O, float* lse, void* workspace, cudaStream_t stream);
/** ft_forward on views: the tensors where `layout` says (its Q, K, V, O; not NULL), for an
 * implementation whose info says `strided`. Workspace: ft_forward_workspace_bytes. */
int ft_forward_strided(const char* impl, ft_problem problem, const ft_layout* layout,
                       const void* Q, const void* K, const void* V, void* O, float* lse,
                       void* workspace, cudaStream_t stream);

/** The workspace bytes backward `impl` needs (see ft_forward_workspace_bytes). The
 * workspace must be the one the paired forward (its info's pairs_with) used where that
 * forward keeps something there (the materializing baseline keeps P); a flash backward's
 * workspace is its own. */
size_t ft_backward_workspace_bytes(const char* impl, ft_problem problem);
/** Backward: dQ, dK, dV from Q, K, V, the forward's O and lse, and dO. */
int ft_backward(const char* impl, ft_problem problem, const void* Q, const void* K,
                const void* V, const void* O, const float* lse, const void* dO, void* dQ,
                void* dK, void* dV, void* workspace, cudaStream_t stream);
/** ft_backward on views: every tensor where `layout` says (not NULL). */
int ft_backward_strided(const char* impl, ft_problem problem, const ft_layout* layout,
                        const void* Q, const void* K, const void* V, const void* O,
                        const float* lse, const void* dO, void* dQ, void* dK, void* dV,
                        void* workspace, cudaStream_t stream);

/* The float64 reference every kernel is checked against (common/reference/reference.hpp),
 * on the host: float32 inputs laid out as contract 1 says, double outputs. A row that sees no
 * key gets O = 0 and lse = -inf. For checking other implementations, and for the tests that
 * compare it with PyTorch's. 0, or -1 for a problem Problem::validate refuses or a NULL. */
int ft_reference_forward(ft_problem problem, const float* Q, const float* K, const float* V,
                         double* O, double* lse);
/** dQ, dK, dV (dK and dV summed over the query heads that share a key/value head) for dO. */
int ft_reference_backward(ft_problem problem, const float* Q, const float* K, const float* V,
                          const float* dO, double* dQ, double* dK, double* dV);

#ifdef __cplusplus
}
#endif

#endif /* FLASHTUT_H */
