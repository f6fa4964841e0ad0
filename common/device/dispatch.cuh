/// @file dispatch.cuh
/// @brief From a problem's run-time dtype and head dimension to the compiled kernel for
/// them, written once: each chapter names the instances it compiles, and the same list
/// both picks the kernel and tells the registry what the implementation supports.
///
/// A kernel is a template over its element type T and head dimension D (D sizes the
/// register and shared-memory tiles, so it must be a compile-time constant). A chapter
/// declares the grid it compiles,
///
///     using Compiled = ft::Instances<ft::DTypes<ft::DType::BFloat16, ft::DType::Float16>,
///                                    ft::HeadDims<64, 128>>;
///
/// launches with `Compiled::dispatch(p, "chapter 07", [&](auto i) { using I = decltype(i);
/// launch<Traits<typename I::Element, I::kHeadDim>>(p, a, stream); })`, and registers
/// `Compiled::dtypes()` and `Compiled::head_dims()` as what it supports, so the list a
/// user is told and the list that is compiled cannot drift apart.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>
#include <vector>

#include "core/check.cuh"
#include "core/dtype.hpp"
#include "core/problem.hpp"

namespace ft {

/// The C++ element type of a DType.
template <DType> struct ElementOf;
template <> struct ElementOf<DType::Float32> { using type = float; };
template <> struct ElementOf<DType::BFloat16> { using type = __nv_bfloat16; };
template <> struct ElementOf<DType::Float16> { using type = __half; };

/// One compiled instance, as dispatch hands it to the call: an empty tag whose type says
/// the element type and the head dimension.
template <class T, int D>
struct Instance {
  using Element = T;
  static constexpr int kHeadDim = D;
};

template <DType... Ts> struct DTypes {};
template <int... Ds> struct HeadDims {};

/// Every listed dtype × every listed head dimension.
template <class DTypeList, class HeadDimList> struct Instances;

template <DType... Ts, int... Ds>
struct Instances<DTypes<Ts...>, HeadDims<Ds...>> {
  static std::vector<DType> dtypes() { return {Ts...}; }
  static std::vector<int> head_dims() { return {Ds...}; }

  /// Calls f(Instance<T, D>{}) for the problem's dtype and head dimension; throws
  /// ft::Unsupported naming both lists when the pair is not compiled.
  template <class F>
  static void dispatch(const Problem& p, const std::string& who, F&& f) {
    if (!(... || on_dtype<Ts>(p, f)))
      throw Unsupported(who + ": compiled for dtype " + dtype_list(dtypes()) +
                        " and head_dim " + head_dim_list() + ", not " + dtype_name(p.dtype) +
                        " with head_dim " + std::to_string(p.head_dim));
  }

 private:
  template <DType T, class F>
  static bool on_dtype(const Problem& p, F& f) {
    if (p.dtype != T) return false;
    return (... || (p.head_dim == Ds && (f(Instance<typename ElementOf<T>::type, Ds>{}), true)));
  }
  static std::string head_dim_list() {
    std::string s;
    for (int d : head_dims()) s += (s.empty() ? "" : ", ") + std::to_string(d);
    return s;
  }
};

}  // namespace ft
