/// @file capi.hpp
/// @brief The C API's checks and plumbing (flashtut.h): a registered implementation
/// (registry.hpp) is found by name and run through these, so the C API calls exactly the
/// code the chapter teaches. C callers get an error code, never an exception.
#pragma once

#include <functional>
#include <initializer_list>
#include <utility>

#include "api/flashtut.h"
#include "harness/harness.hpp"

namespace ft::capi {

/// The C struct as a validated Problem (Problem::validate); throws ft::Unsupported.
Problem to_problem(const ft_problem& p);
/// Throws ft::Unsupported naming the first pointer that is NULL (and the memory it should
/// point into: "device", or "host" for the reference).
void check_present(std::initializer_list<std::pair<const char*, const void*>> pointers,
                   const char* memory = "device");
/// Throws ft::CudaError (CUDA's code, and first "no CUDA GPU found") when no GPU can run a
/// kernel, so that a caller without one reads why, not the failure of the first CUDA call.
void require_gpu();
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
