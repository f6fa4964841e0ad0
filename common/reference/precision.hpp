/// @file precision.hpp
/// @brief The same-precision baseline: what a plain, unfused attention computes in a given
/// dtype, and how far that is from the float64 reference. The tests hold every
/// implementation to it.
///
/// **The contract.** An implementation's relative L2 error, per output tensor (O, lse, dQ,
/// dK, dV), may be no worse than 2× the error of the *same precision's unfused computation*
/// on the same inputs (and never above the dtype's fixed tolerance; testing.hpp has the
/// floor under small errors). "Unfused" is the computation exactly as the formulas read:
///
/// ```
/// forward:  S = scale·Q·Kᵀ            stored
///           P = safe softmax(S)        stored: m = max_j S_ij, e_ij = exp(S_ij − m),
///                                       l = Σ_j e_ij, P_ij = e_ij / l; lse_i = m + log l
///           O = P·V                    stored
/// backward: D  = rowsum(dO∘O)          float32
///           dV = Pᵀ·dO                 stored
///           dP = dO·Vᵀ                 stored
///           dS = P∘(dP − D)            stored
///           dQ = scale·dS·K            stored
///           dK = scale·dSᵀ·Q           stored
/// ```
///
/// where "stored" means rounded to the problem's dtype (ft::round_to), every product is
/// accumulated in float32 with fused multiply-adds in the order of its sum (what CUDA cores
/// and tensor cores do), and the elementwise steps compute in float32. For float32 that is
/// float storage and float accumulation; for bf16 and fp16 the inputs are already rounded to
/// the dtype (the caller's job: round_inputs()), and every stored intermediate is rounded.
/// lse and D are float32 whatever the dtype, as in the layout contract.
///
/// So the baseline error measures what the inputs' conditioning and the dtype cost an
/// honest implementation; an implementation that is more than twice as far from the exact
/// answer has lost precision somewhere of its own (a log-sum-exp carried with too few bits,
/// probabilities that do not sum to one, an accumulator in the storage type...).
///
/// One head at a time (P is one head's N×N grid, in float32), rows split across OpenMP
/// threads when built with OpenMP; N = 2048, d = 128 takes a few seconds per head on one
/// core.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "reference/inputs.hpp"
#include "core/problem.hpp"

namespace ft {

/// y[0..n) += a·x[0..n), one fused multiply-add (one rounding) per element: the step every
/// product of the baseline is built from (each y[i] is its own chain, summed in order).
/// Vectorized, with the FMA instruction where the CPU has one (the exact library fmaf where
/// it has not: same numbers, slower). The CPU emulations of the kernels use it too.
void fma_axpy(int n, float a, const float* x, float* y);
/// Σ_k a[k]·b[k] as one chain of fused multiply-adds from k = 0.
float fma_dot(int n, const float* a, const float* b);

/// Rounds every element to `t` in place (ft::round_to; nothing for Float32).
void round_in_place(DType t, std::vector<float>& x);
/// Rounds Q, K, V and dO to `t`: the inputs of a problem of that dtype, as floats.
void round_inputs(DType t, AttentionInputs& in);

/// Relative L2 error ‖got − ref‖₂ / ‖ref‖₂ (‖got − ref‖₂ when ref is all zeros) over n
/// values; NaN when any `got` is not finite.
double relative_l2(const float* got, const double* ref, size_t n);

/// The order of every sum of the unfused computation: index 0 first, or the last first.
enum class SumOrder { Ascending, Descending };

/// The unfused forward of query head `bh` in `p.dtype`: O (N_q·d values, each representable
/// in the dtype) and lse (N_q floats) of that head. Q, K, V are whole tensors (K and V of
/// the key/value heads, problem.hpp) whose values are already representable in the dtype.
void unfused_forward_head(const Problem& p, const float* Q, const float* K, const float* V,
                          int64_t bh, float* O, float* lse,
                          SumOrder order = SumOrder::Ascending);

/// The unfused backward of head `bh` in `p.dtype`, its own forward included (the backward
/// reads the P and O that forward stored): that head's O, lse, dQ, and its contribution to
/// its key/value head's dK and dV (N_kv·d each, stored). With grouped heads the baseline of
/// a whole problem adds the group's contributions in float32 before storing them once.
void unfused_backward_head(const Problem& p, const float* Q, const float* K, const float* V,
                           const float* dO, int64_t bh, float* O, float* lse, float* dQ,
                           float* dK, float* dV, SumOrder order = SumOrder::Ascending);

/// Relative L2 errors, one per output tensor (0 for a tensor not computed).
struct TensorErrors {
  double O = 0, lse = 0, dQ = 0, dK = 0, dV = 0;
};

/// The float64 reference of a whole problem, as the tests keep it (testing.cu): O and lse;
/// dQ, dK, dV when the backward was computed (empty otherwise).
struct ReferenceTensors {
  std::vector<double> O, lse, dQ, dK, dV;
};

/// The baseline error of the forward: the unfused forward of every head of `in` (already
/// rounded to p.dtype) against `ref.O` and `ref.lse`, run twice, with every sum ascending and
/// with every sum descending, and per tensor the larger of the two errors. Fills O and lse.
///
/// Why two orders: on inputs where a few entries carry the error (large logits, where most
/// rows are one-hot and the few rows that mix two keys decide the norm; tiny problems), one
/// realization of the rounding errors can be several times smaller than another of the same
/// computation. An implementation is held to 2× the larger, not to one lucky order. NaN for
/// a tensor the unfused computation itself cannot form (an overflow in the dtype).
TensorErrors unfused_forward_error(const Problem& p, const AttentionInputs& in,
                                   const ReferenceTensors& ref);

/// The baseline error of the backward: the unfused forward and backward of every head
/// against `ref` (which must hold dQ, dK, dV), both orders as above. Fills all five.
TensorErrors unfused_backward_error(const Problem& p, const AttentionInputs& in,
                                    const ReferenceTensors& ref);

/// What storing O in the dtype costs every flash backward, whatever its arithmetic: the
/// backward forms D = rowsum(dO∘O) from the O the forward stored, and dS = P∘(dP − D). Where
/// a row's P is nearly one-hot (large logits), dP − D is a small difference of two large
/// terms, and O's rounding (2^-9 relative in bf16) is most of it. dV has no D.
///
/// Computed exactly, in float64, from the reference: ΔD_i = Σ_c dO_ic·(round(O_ic) − O_ic)
/// perturbs dS_ij by −P_ij·ΔD_i, hence dQ_i by −scale·ΔD_i·Σ_j P_ij·k_j and dK_j by
/// −scale·Σ_i P_ij·ΔD_i·q_i; the result is each perturbation's norm over the reference's
/// (relative L2, whole tensor). Zero for float32 (not computed: O's float32 rounding is below
/// 1e-7 of the gradients). O(B·H·N²·d) work, done only for bf16 and fp16.
struct StoredOError {
  double dQ = 0, dK = 0;
};
StoredOError stored_o_error(const Problem& p, const AttentionInputs& in,
                            const ReferenceTensors& ref);

// ---- The reference and the baseline of a problem, computed once ---------------------------

/// Everything a test compares an implementation with: the float64 reference of the problem
/// on its standard inputs, and the same-precision baseline's error per tensor.
struct Reference {
  ReferenceTensors tensors;  ///< O, lse; dQ, dK, dV too for a backward reference
  TensorErrors baseline;     ///< unfused_forward_error / unfused_backward_error
};

/// The inputs a Reference is computed from: make_inputs(p, kind, seed), rounded to p.dtype
/// (round_inputs). The tests upload exactly these.
AttentionInputs reference_inputs(const Problem& p, InputKind kind, uint64_t seed);

/// The name of the environment variable that points the reference cache at a directory:
/// FT_REFERENCE_CACHE. ctest sets it for every test (cmake/flashtut.cmake) to a folder in the
/// build tree; unset or empty, nothing is read from or written to disk.
constexpr const char* kReferenceCacheEnv = "FT_REFERENCE_CACHE";

/// The Reference of (p, kind, seed) — forward only, or with the backward — computed once:
/// first looked up in this process, then in the directory `cache_dir` (the value of
/// FT_REFERENCE_CACHE when not given), and only then computed from scratch, and written
/// there for the next process. The result lives as long as the process.
///
/// On disk, one file per key and part (forward: O, lse; backward: dQ, dK, dV), written to a
/// temporary name and renamed into place (atomic on POSIX file systems), so a process
/// running in parallel sees the whole file or none. The header names the key in full (the
/// problem with its scale and dtype, the input kind, the seed, the part, a format version and
/// a fingerprint of the reference, input and baseline code computed at start-up), the
/// sizes, and a checksum of the data: a file whose header, size or checksum does not match
/// is recomputed and replaced, never trusted. The reference itself is still the independent
/// float64 computation of reference.hpp; the cache only saves repeating it.
const Reference& cached_reference(const Problem& p, InputKind kind, uint64_t seed, bool backward);
const Reference& cached_reference(const Problem& p, InputKind kind, uint64_t seed, bool backward,
                                  const std::string& cache_dir);

/// Counters of what cached_reference did in this process (for the tests of the cache).
struct ReferenceCacheStats {
  int computed = 0;  ///< parts computed from scratch
  int loaded = 0;    ///< parts read from a valid file
  int rejected = 0;  ///< files present but not matching (stale, foreign, truncated, corrupt)
  int written = 0;   ///< parts written to the cache directory
};
ReferenceCacheStats reference_cache_stats();
/// The fingerprint of the reference, input and baseline code that every cache key carries,
/// computed afresh (16 hex digits). Deterministic: the same in every process of one build.
std::string reference_code_fingerprint();
/// Forgets the in-process cache (the files stay): the next call looks on disk again.
void clear_reference_memory_cache();

}  // namespace ft
