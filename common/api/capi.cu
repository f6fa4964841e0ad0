/// @file capi.cu
/// @brief The C API's shared plumbing: exceptions become return codes and a message.
#include "api/capi.hpp"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>

#include "core/check.cuh"
#include "device/launch.cuh"
#include "harness/registry.hpp"
#include "core/strides.hpp"
#include "reference/reference.hpp"

namespace {
thread_local std::string g_last_error;
}

extern "C" const char* ft_last_error(void) { return g_last_error.c_str(); }
extern "C" int ft_api_version(void) { return FT_API_VERSION; }
extern "C" size_t ft_problem_size(void) { return sizeof(ft_problem); }

namespace ft::capi {

Problem to_problem(const ft_problem& p) {
  Problem q;
  q.batch = p.batch;
  q.heads_q = p.heads_q;
  q.heads_kv = p.heads_kv;
  q.len_q = p.len_q;
  q.len_kv = p.len_kv;
  q.head_dim = p.head_dim;
  q.causal = p.causal != 0;
  q.align = static_cast<CausalAlign>(p.causal_align);  // validate() refuses other values
  q.scale = p.scale;
  q.dtype = static_cast<DType>(p.dtype);  // likewise
  q.validate();
  return q;
}

void check_aligned(std::initializer_list<std::pair<const char*, const void*>> pointers,
                   size_t alignment) {
  for (const auto& [name, ptr] : pointers) {
    const uintptr_t at = reinterpret_cast<uintptr_t>(ptr);
    if (at % alignment != 0)
      throw Unsupported(std::string(name) + " = 0x" + [&] {
        char hex[32];
        std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(at));
        return std::string(hex);
      }() + " is not a multiple of " + std::to_string(alignment) + " bytes" +
                        (alignment == FT_ALIGNMENT
                             ? " (the kernels move 16 bytes at a time): pass memory from cudaMalloc or a "
                               "tensor's start, not a view into one"
                             : " (the size of one element): pass a pointer to an element"));
  }
}

void check_present(std::initializer_list<std::pair<const char*, const void*>> pointers, const char* memory) {
  for (const auto& [name, ptr] : pointers)
    if (ptr == nullptr) throw Unsupported(std::string(name) + " is NULL: pass a " + memory + " pointer");
}

void require_gpu() {
  // Found once, a GPU stays found: the check costs a call to the runtime only until then.
  static std::atomic<bool> found{false};
  if (found.load(std::memory_order_relaxed)) return;
  std::string why;
  if (!gpu_available(&why)) {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    (void)cudaGetLastError();  // leave no sticky error behind for the caller's next call
    throw CudaError(e != cudaSuccess ? e : cudaErrorNoDevice, why);
  }
  found.store(true, std::memory_order_relaxed);
}

namespace {
/// The workspace must be there whenever the implementation needs one.
template <class Impl>
void check_workspace(const Impl& impl, const Problem& q, const void* workspace) {
  const size_t need = impl.workspace_bytes(q);
  if (need > 0 && workspace == nullptr)
    throw Unsupported("workspace is NULL, but this function needs " + std::to_string(need) +
                      " bytes of it (see its _workspace_bytes)");
}
}  // namespace

int guarded(const std::function<void()>& fn) {
  try {
    fn();
    g_last_error.clear();
    return 0;
  } catch (const CudaError& e) {
    g_last_error = e.what();
    return int(e.code());
  } catch (const std::exception& e) {
    g_last_error = e.what();
    return -1;
  } catch (...) {
    g_last_error = "unknown C++ exception inside libflashtut";
    return -1;
  }
}

int forward(const ForwardImpl& impl, const ft_problem& p, const ForwardArgs& a, cudaStream_t s) {
  return guarded([&] {
    const Problem q = to_problem(p);
    check_supported(impl, q);
    check_present({{"Q", a.Q.get()}, {"K", a.K.get()}, {"V", a.V.get()}, {"O", a.O.get()},
                   {"lse", a.lse}});
    check_workspace(impl, q, a.workspace);
    check_aligned({{"Q", a.Q.get()}, {"K", a.K.get()}, {"V", a.V.get()}, {"O", a.O.get()},
                   {"lse", a.lse}, {"workspace", a.workspace}});
    require_gpu();
    require_sm(impl.min_sm, "chapter " + impl.chapter + " (" + impl.variant + ")");
    impl.run(q, a, s);
  });
}

int backward(const BackwardImpl& impl, const ft_problem& p, const BackwardArgs& a,
             cudaStream_t s) {
  return guarded([&] {
    const Problem q = to_problem(p);
    check_supported(impl, q);
    check_present({{"Q", a.Q.get()}, {"K", a.K.get()}, {"V", a.V.get()}, {"O", a.O.get()},
                   {"lse", a.lse}, {"dO", a.dO.get()}, {"dQ", a.dQ.get()}, {"dK", a.dK.get()},
                   {"dV", a.dV.get()}});
    check_workspace(impl, q, a.workspace);
    check_aligned({{"Q", a.Q.get()}, {"K", a.K.get()}, {"V", a.V.get()}, {"O", a.O.get()},
                   {"lse", a.lse}, {"dO", a.dO.get()}, {"dQ", a.dQ.get()}, {"dK", a.dK.get()},
                   {"dV", a.dV.get()}, {"workspace", a.workspace}});
    require_gpu();
    require_sm(impl.min_sm, "chapter " + impl.chapter + " (" + impl.variant + ")");
    impl.run(q, a, s);
  });
}

namespace {
/// The C struct as the C++ one, after the checks every strided call makes first.
template <class Impl>
Layout layout_for(const Impl& impl, const ft_layout* layout) {
  if (layout == nullptr) throw Unsupported("layout is NULL: pass the tensors' strides");
  if (!impl.strided)
    throw Unsupported("chapter " + impl.chapter + " (" + impl.variant + ") reads contiguous "
                      "tensors only: call the function without _strided");
  const auto s = [](const ft_strides& x) { return Strides{x.batch, x.head, x.row}; };
  const ft_layout& l = *layout;
  return {s(l.Q), s(l.K), s(l.V), s(l.O), s(l.dO), s(l.dQ), s(l.dK), s(l.dV)};
}

/// A strided call: the layout checked (layout_for, then its rules against the problem)
/// before `call` runs the plain path on the args with the layout in them.
template <class Impl, class Args, class Call>
int strided(const Impl& impl, const ft_problem& p, const ft_layout* layout, Args a,
            bool backward, Call call) {
  Layout l;
  const int rc = guarded([&] {
    l = layout_for(impl, layout);
    check_layout(to_problem(p), l, backward);
  });
  if (rc != 0) return rc;
  a.layout = &l;
  return call(a);
}
}  // namespace

int forward_strided(const ForwardImpl& impl, const ft_problem& p, const ft_layout* layout,
                    ForwardArgs a, cudaStream_t s) {
  return strided(impl, p, layout, a, false, [&](const ForwardArgs& x) { return forward(impl, p, x, s); });
}

int backward_strided(const BackwardImpl& impl, const ft_problem& p, const ft_layout* layout,
                     BackwardArgs a, cudaStream_t s) {
  return strided(impl, p, layout, a, true, [&](const BackwardArgs& x) { return backward(impl, p, x, s); });
}

namespace {
template <class Impl>
size_t workspace_of(const Impl& impl, const ft_problem& p) {
  size_t bytes = FT_WORKSPACE_ERROR;
  guarded([&] {
    const Problem q = to_problem(p);
    check_supported(impl, q);
    bytes = impl.workspace_bytes(q);
  });
  return bytes;
}
}  // namespace

size_t workspace(const ForwardImpl& impl, const ft_problem& p) { return workspace_of(impl, p); }
size_t workspace(const BackwardImpl& impl, const ft_problem& p) { return workspace_of(impl, p); }

}  // namespace ft::capi

// ---- The implementations by name (flashtut.h) ----------------------------------------------

namespace {

using namespace ft;

template <class Entry>
std::string names_of(const std::vector<Entry>& list) {
  std::string names;
  for (const Entry& e : list) names += (names.empty() ? "" : ", ") + e.name;
  return names;
}

template <class Entry, class Find>
const Entry& named(const char* impl, const char* pass, const std::vector<Entry>& list, Find find) {
  if (impl == nullptr)
    throw Unsupported(std::string(pass) + " implementation name is NULL: pass one such as \"" +
                      (list.empty() ? std::string("ch07") : list.front().name) + "\"");
  if (const Entry* e = find(impl)) return *e;
  throw Unsupported("no " + std::string(pass) + " implementation named '" + impl +
                    "' in this library (there are: " + names_of(list) + ")");
}
const RegisteredForward& forward_named(const char* impl) {
  return named(impl, "forward", registered_forwards(), find_forward);
}
const RegisteredBackward& backward_named(const char* impl) {
  return named(impl, "backward", registered_backwards(), find_backward);
}

/// The fields every implementation shares, from its impl and listing.
template <class Entry>
void describe(const Entry& e, const char* pass, ft_impl_info* info) {
  *info = ft_impl_info{};
  info->name = e.name.c_str();
  info->alias = e.alias.c_str();
  info->pass = pass;
  info->chapter = e.impl.chapter.c_str();
  info->variant = e.impl.variant.c_str();
  info->what = e.impl.what.c_str();
  info->pairs_with = e.listing.pairs_with.c_str();
  for (DType t : e.impl.dtypes) info->dtypes |= 1u << int(t);
  const size_t kMaxDims = sizeof info->head_dims / sizeof info->head_dims[0];
  if (e.impl.head_dims.size() > kMaxDims)
    throw std::logic_error(e.name + " lists more head dims than ft_impl_info holds");
  for (size_t i = 0; i < e.impl.head_dims.size(); ++i) info->head_dims[i] = e.impl.head_dims[i];
  info->num_head_dims = int(e.impl.head_dims.size());
  info->min_sm = e.impl.min_sm;
  info->lengths = e.impl.features.lengths;
  info->grouped = e.impl.features.grouped;
  info->strided = e.impl.strided;
  info->tour = e.listing.tour;
}

}  // namespace

extern "C" int ft_impl_count(void) {
  return int(registered_forwards().size() + registered_backwards().size());
}

extern "C" int ft_impl_info_at(int index, ft_impl_info* info) {
  return ft::capi::guarded([&] {
    if (info == nullptr) throw Unsupported("info is NULL: pass an ft_impl_info to fill");
    const int forwards = int(registered_forwards().size());
    if (index < 0 || index >= ft_impl_count())
      throw Unsupported("no implementation " + std::to_string(index) + " (there are " +
                        std::to_string(ft_impl_count()) + ")");
    if (index < forwards) describe(registered_forwards()[size_t(index)], "forward", info);
    else describe(registered_backwards()[size_t(index - forwards)], "backward", info);
  });
}

extern "C" size_t ft_forward_workspace_bytes(const char* impl, ft_problem p) {
  const RegisteredForward* f = nullptr;
  if (ft::capi::guarded([&] { f = &forward_named(impl); }) != 0) return FT_WORKSPACE_ERROR;
  return ft::capi::workspace(f->impl, p);
}

extern "C" int ft_forward(const char* impl, ft_problem p, const void* Q, const void* K,
                          const void* V, void* O, float* lse, void* workspace,
                          cudaStream_t stream) {
  const RegisteredForward* f = nullptr;
  if (const int rc = ft::capi::guarded([&] { f = &forward_named(impl); })) return rc;
  return ft::capi::forward(f->impl, p, {Q, K, V, O, lse, workspace}, stream);
}

extern "C" int ft_forward_strided(const char* impl, ft_problem p, const ft_layout* layout,
                                  const void* Q, const void* K, const void* V, void* O,
                                  float* lse, void* workspace, cudaStream_t stream) {
  const RegisteredForward* f = nullptr;
  if (const int rc = ft::capi::guarded([&] { f = &forward_named(impl); })) return rc;
  return ft::capi::forward_strided(f->impl, p, layout, {Q, K, V, O, lse, workspace}, stream);
}

extern "C" size_t ft_backward_workspace_bytes(const char* impl, ft_problem p) {
  const RegisteredBackward* b = nullptr;
  if (ft::capi::guarded([&] { b = &backward_named(impl); }) != 0) return FT_WORKSPACE_ERROR;
  return ft::capi::workspace(b->impl, p);
}

extern "C" int ft_backward(const char* impl, ft_problem p, const void* Q, const void* K,
                           const void* V, const void* O, const float* lse, const void* dO,
                           void* dQ, void* dK, void* dV, void* workspace, cudaStream_t stream) {
  const RegisteredBackward* b = nullptr;
  if (const int rc = ft::capi::guarded([&] { b = &backward_named(impl); })) return rc;
  return ft::capi::backward(b->impl, p, {Q, K, V, O, lse, dO, dQ, dK, dV, workspace}, stream);
}

extern "C" int ft_backward_strided(const char* impl, ft_problem p, const ft_layout* layout,
                                   const void* Q, const void* K, const void* V, const void* O,
                                   const float* lse, const void* dO, void* dQ, void* dK,
                                   void* dV, void* workspace, cudaStream_t stream) {
  const RegisteredBackward* b = nullptr;
  if (const int rc = ft::capi::guarded([&] { b = &backward_named(impl); })) return rc;
  return ft::capi::backward_strided(b->impl, p, layout,
                                    {Q, K, V, O, lse, dO, dQ, dK, dV, workspace}, stream);
}

// ---- The float64 reference on the host ------------------------------------------------------

extern "C" int ft_reference_forward(ft_problem p, const float* Q, const float* K, const float* V,
                                    double* O, double* lse) {
  return ft::capi::guarded([&] {
    const ft::Problem q = ft::capi::to_problem(p);
    ft::capi::check_present({{"Q", Q}, {"K", K}, {"V", V}, {"O", O}, {"lse", lse}}, "host");
    ft::reference_forward(q, Q, K, V, O, lse);
  });
}

extern "C" int ft_reference_backward(ft_problem p, const float* Q, const float* K, const float* V,
                                     const float* dO, double* dQ, double* dK, double* dV) {
  return ft::capi::guarded([&] {
    const ft::Problem q = ft::capi::to_problem(p);
    ft::capi::check_present({{"Q", Q}, {"K", K}, {"V", V}, {"dO", dO}, {"dQ", dQ}, {"dK", dK},
                             {"dV", dV}},
                            "host");
    ft::reference_backward(q, Q, K, V, dO, dQ, dK, dV);
  });
}
