/// @file reference.hpp
/// @brief The float64 CPU reference for attention: forward (O and log-sum-exp) and backward
/// (dQ, dK, dV), causal (either alignment) and not, any two lengths, grouped heads. Written
/// for clarity, one query head at a time, in the papers' notation; every kernel in the
/// tutorial is checked against it. Query head bh reads key/value head p.kv_head(bh).
#pragma once

#include <cstdint>
#include <vector>

#include "core/problem.hpp"

namespace ft {

/// Forward for query head `bh` (0 ≤ bh < B·H_q) and query rows [row_begin, row_end):
/// S = scale·Q·Kᵀ (masked), P = softmax(S), O = P·V, lse_i = log Σ_j exp(S_ij). A row that
/// sees no key (problem.hpp) gets O_i = 0 and lse_i = −∞.
/// Inputs are whole tensors; O_out holds (row_end-row_begin)·d values, lse_out one per row.
template <typename T>
void reference_forward_rows(const Problem& p, const T* Q, const T* K, const T* V, int64_t bh,
                            int row_begin, int row_end, double* O_out, double* lse_out);

/// Forward for every head and row: O is B·H_q·N_q·d, lse is B·H_q·N_q. Parallel over heads and rows
/// when built with OpenMP.
template <typename T>
void reference_forward(const Problem& p, const T* Q, const T* K, const T* V, double* O,
                       double* lse);

/// Backward for query head `bh`: given dO, the gradients of Σ O∘dO with respect to Q, K, V.
/// Recomputes P from scratch; dQ is that head's N_q·d slice, dK and dV (N_kv·d each) what
/// this query head contributes to its key/value head's gradients (written, not added: with
/// grouped heads the caller sums the group's contributions, as reference_backward does).
template <typename T>
void reference_backward_head(const Problem& p, const T* Q, const T* K, const T* V, const T* dO,
                             int64_t bh, double* dQ, double* dK, double* dV);

/// Backward for every head (whole tensors out; dK and dV summed over each group of query
/// heads). Parallel over rows with OpenMP.
template <typename T>
void reference_backward(const Problem& p, const T* Q, const T* K, const T* V, const T* dO,
                        double* dQ, double* dK, double* dV);

}  // namespace ft
