/// @file capi.hpp
/// @brief How a chapter exports its implementations as the plain C functions declared in
/// flashtut.h: one macro line per implementation, so the C API calls exactly the code the
/// chapter teaches. C callers get an error code, never an exception.
#pragma once

#include <functional>

#include "flashtut.h"
#include "harness.hpp"

namespace ft::capi {

Problem to_problem(const ft_problem& p);
/// Runs fn, turning any exception into a return code and a message for ft_last_error().
int guarded(const std::function<void()>& fn);
int forward(const ForwardImpl& impl, const ft_problem& p, const ForwardArgs& a, cudaStream_t s);
int backward(const BackwardImpl& impl, const ft_problem& p, const BackwardArgs& a, cudaStream_t s);
size_t workspace(WorkspaceFn fn, const ft_problem& p);

}  // namespace ft::capi

/// Defines `NAME(problem, Q, K, V, O, lse, workspace, stream)` and
/// `NAME_workspace_bytes(problem)` for the ForwardImpl that `IMPL` evaluates to.
#define FT_EXPORT_FORWARD(NAME, IMPL)                                                      \
  extern "C" size_t NAME##_workspace_bytes(ft_problem p) {                                 \
    return ::ft::capi::workspace((IMPL).workspace_bytes, p);                               \
  }                                                                                        \
  extern "C" int NAME(ft_problem p, const float* Q, const float* K, const float* V,       \
                      float* O, float* lse, void* workspace, cudaStream_t stream) {        \
    return ::ft::capi::forward((IMPL), p, {Q, K, V, O, lse, workspace}, stream);           \
  }

/// Defines `NAME(problem, Q, K, V, O, lse, dO, dQ, dK, dV, workspace, stream)` and
/// `NAME_workspace_bytes(problem)` for the BackwardImpl that `IMPL` evaluates to.
#define FT_EXPORT_BACKWARD(NAME, IMPL)                                                     \
  extern "C" size_t NAME##_workspace_bytes(ft_problem p) {                                 \
    return ::ft::capi::workspace((IMPL).workspace_bytes, p);                               \
  }                                                                                        \
  extern "C" int NAME(ft_problem p, const float* Q, const float* K, const float* V,       \
                      const float* O, const float* lse, const float* dO, float* dQ,        \
                      float* dK, float* dV, void* workspace, cudaStream_t stream) {        \
    return ::ft::capi::backward((IMPL), p, {Q, K, V, O, lse, dO, dQ, dK, dV, workspace},   \
                                stream);                                                   \
  }
