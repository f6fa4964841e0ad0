/// @file capi.cu
/// @brief The C API's shared plumbing: exceptions become return codes and a message.
#include "capi.hpp"

#include <string>

#include "check.cuh"

namespace {
thread_local std::string g_last_error;
}

extern "C" const char* ft_last_error(void) { return g_last_error.c_str(); }

namespace ft::capi {

Problem to_problem(const ft_problem& p) {
  Problem q;
  q.batch = p.batch;
  q.heads = p.heads;
  q.seq_len = p.seq_len;
  q.head_dim = p.head_dim;
  q.causal = p.causal != 0;
  q.scale = p.scale;
  if (q.batch < 1 || q.heads < 1 || q.seq_len < 1 || q.head_dim < 1)
    throw Unsupported("batch, heads, seq_len and head_dim must all be >= 1, got " + q.describe());
  return q;
}

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
  }
}

int forward(const ForwardImpl& impl, const ft_problem& p, const ForwardArgs& a, cudaStream_t s) {
  return guarded([&] {
    const Problem q = to_problem(p);
    check_head_dim(impl.head_dims, q.head_dim, "chapter " + impl.chapter + " " + impl.variant);
    impl.run(q, a, s);
  });
}

int backward(const BackwardImpl& impl, const ft_problem& p, const BackwardArgs& a,
             cudaStream_t s) {
  return guarded([&] {
    const Problem q = to_problem(p);
    check_head_dim(impl.head_dims, q.head_dim, "chapter " + impl.chapter + " " + impl.variant);
    impl.run(q, a, s);
  });
}

size_t workspace(WorkspaceFn fn, const ft_problem& p) {
  size_t bytes = 0;
  guarded([&] { bytes = fn(to_problem(p)); });
  return bytes;
}

}  // namespace ft::capi
