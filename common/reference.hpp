/// @file reference.hpp
/// @brief The float64 CPU reference for attention: forward (O and log-sum-exp) and backward
/// (dQ, dK, dV), causal and not. Written for clarity, one head at a time, in the papers'
/// notation; every kernel in the tutorial is checked against it.
#pragma once

#include <cstdint>
#include <vector>

#include "problem.hpp"

namespace ft {

/// Forward for head `bh` (0 ≤ bh < B·H) and query rows [row_begin, row_end):
/// S = scale·Q·Kᵀ (masked), P = softmax(S), O = P·V, lse_i = log Σ_j exp(S_ij).
/// Inputs are whole tensors; O_out holds (row_end-row_begin)·d values, lse_out one per row.
template <typename T>
void reference_forward_rows(const Problem& p, const T* Q, const T* K, const T* V, int64_t bh,
                            int row_begin, int row_end, double* O_out, double* lse_out);

/// Forward for every head and row: O is B·H·N·d, lse is B·H·N. Parallel over heads and rows
/// when built with OpenMP.
template <typename T>
void reference_forward(const Problem& p, const T* Q, const T* K, const T* V, double* O,
                       double* lse);

/// Backward for head `bh`: given dO, the gradients of Σ O∘dO with respect to Q, K, V.
/// Recomputes P from scratch; outputs are that head's N·d slices (written, not added).
template <typename T>
void reference_backward_head(const Problem& p, const T* Q, const T* K, const T* V, const T* dO,
                             int64_t bh, double* dQ, double* dK, double* dV);

/// Backward for every head (whole tensors out). Parallel over heads with OpenMP.
template <typename T>
void reference_backward(const Problem& p, const T* Q, const T* K, const T* V, const T* dO,
                        double* dQ, double* dK, double* dV);

}  // namespace ft
