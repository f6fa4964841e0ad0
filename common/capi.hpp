/// @file capi.hpp
/// @brief How a chapter exports its implementations as the plain C functions declared in
/// flashtut.h: one macro line per implementation, so the C API calls exactly the code the
/// chapter teaches. C callers get an error code, never an exception.
#pragma once

#include <functional>
#include <initializer_list>
#include <utility>

#include "flashtut.h"
#include "harness.hpp"

namespace ft::capi {

/// The C struct as a validated Problem (Problem::validate); throws ft::Unsupported.
Problem to_problem(const ft_problem& p);
/// Throws ft::Unsupported naming the first pointer that is NULL.
void check_present(std::initializer_list<std::pair<const char*, const void*>> pointers);
/// Throws ft::Unsupported naming the first pointer that is not a multiple of `alignment`
/// bytes (NULL passes here: check_present names it).
void check_aligned(std::initializer_list<std::pair<const char*, const void*>> pointers,
                   size_t alignment = FT_ALIGNMENT);
/// Runs fn, turning any exception (of any type) into a return code and a message for
/// ft_last_error(): no exception crosses the extern "C" boundary.
int guarded(const std::function<void()>& fn);
int forward(const ForwardImpl& impl, const ft_problem& p, const ForwardArgs& a, cudaStream_t s);
int backward(const BackwardImpl& impl, const ft_problem& p, const BackwardArgs& a, cudaStream_t s);
/// The same, on views: `layout` (refused if NULL, if `impl` is not strided, or if it breaks a
/// rule of ft::check_layout) becomes the args' Layout.
int forward_strided(const ForwardImpl& impl, const ft_problem& p, const ft_layout* layout,
                    ForwardArgs a, cudaStream_t s);
int backward_strided(const BackwardImpl& impl, const ft_problem& p, const ft_layout* layout,
                     BackwardArgs a, cudaStream_t s);
/// The workspace of `impl` for `p`, or FT_WORKSPACE_ERROR (ft_last_error() set) when the
/// problem is invalid or unsupported.
size_t workspace(const ForwardImpl& impl, const ft_problem& p);
size_t workspace(const BackwardImpl& impl, const ft_problem& p);

}  // namespace ft::capi

/// Defines `NAME(problem, Q, K, V, O, lse, workspace, stream)` and
/// `NAME_workspace_bytes(problem)` for the ForwardImpl that `IMPL` evaluates to.
#define FT_EXPORT_FORWARD(NAME, IMPL)                                                      \
  extern "C" size_t NAME##_workspace_bytes(ft_problem p) {                                 \
    return ::ft::capi::workspace((IMPL), p);                               \
  }                                                                                        \
  extern "C" int NAME(ft_problem p, const void* Q, const void* K, const void* V, void* O, \
                      float* lse, void* workspace, cudaStream_t stream) {                 \
    return ::ft::capi::forward((IMPL), p, {Q, K, V, O, lse, workspace}, stream);           \
  }

/// Defines `NAME(problem, Q, K, V, O, lse, dO, dQ, dK, dV, workspace, stream)` and
/// `NAME_workspace_bytes(problem)` for the BackwardImpl that `IMPL` evaluates to.
#define FT_EXPORT_BACKWARD(NAME, IMPL)                                                     \
  extern "C" size_t NAME##_workspace_bytes(ft_problem p) {                                 \
    return ::ft::capi::workspace((IMPL), p);                               \
  }                                                                                        \
  extern "C" int NAME(ft_problem p, const void* Q, const void* K, const void* V,         \
                      const void* O, const float* lse, const void* dO, void* dQ, void* dK, \
                      void* dV, void* workspace, cudaStream_t stream) {                   \
    return ::ft::capi::backward((IMPL), p, {Q, K, V, O, lse, dO, dQ, dK, dV, workspace},   \
                                stream);                                                   \
  }

/// Defines `NAME_strided(problem, layout, Q, K, V, O, lse, workspace, stream)` for the strided
/// ForwardImpl that `IMPL` evaluates to (its workspace query is NAME's).
#define FT_EXPORT_FORWARD_STRIDED(NAME, IMPL)                                                  \
  extern "C" int NAME##_strided(ft_problem p, const ft_layout* layout, const void* Q,         \
                                const void* K, const void* V, void* O, float* lse,            \
                                void* workspace, cudaStream_t stream) {                       \
    return ::ft::capi::forward_strided((IMPL), p, layout, {Q, K, V, O, lse, workspace}, stream); \
  }

/// Defines `NAME_strided(problem, layout, Q, K, V, O, lse, dO, dQ, dK, dV, workspace, stream)`.
#define FT_EXPORT_BACKWARD_STRIDED(NAME, IMPL)                                                 \
  extern "C" int NAME##_strided(ft_problem p, const ft_layout* layout, const void* Q,         \
                                const void* K, const void* V, const void* O, const float* lse, \
                                const void* dO, void* dQ, void* dK, void* dV, void* workspace, \
                                cudaStream_t stream) {                                        \
    return ::ft::capi::backward_strided((IMPL), p, layout,                                     \
                                        {Q, K, V, O, lse, dO, dQ, dK, dV, workspace}, stream); \
  }
