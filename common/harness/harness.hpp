/// @file harness.hpp
/// @brief What a chapter hands the harness (its implementations, as plain function
/// pointers), and the one place that measures them: fit check, inputs, poisoned outputs,
/// verification against the float64 reference, timing and the traffic model. The chapter
/// programs, the tour and the tests all go through here, so every number is taken the
/// same way.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "reference/inputs.hpp"
#include "core/problem.hpp"
#include "core/strides.hpp"
#include "harness/table.hpp"
#include "harness/traffic.hpp"

namespace ft {

/// A device pointer to a tensor of the problem's dtype. The float32 chapters (01–05) use it
/// as the `float*` it converts to; the half-precision chapters name their element type with
/// `as<T>()`. The harness refuses a problem whose dtype an implementation does not list, so
/// a float32 kernel never sees bf16 data through the conversion.
template <class Void>  // `const void` for inputs, `void` for outputs
class TensorPtr {
 public:
  using Float = std::conditional_t<std::is_const_v<Void>, const float, float>;
  TensorPtr() = default;
  TensorPtr(Void* p) : p_(p) {}  // NOLINT: implicit, so {Q, K, V, ...} lists stay plain
  template <class T>
  auto* as() const {
    return static_cast<std::conditional_t<std::is_const_v<Void>, const T, T>*>(p_);
  }
  operator Float*() const { return static_cast<Float*>(p_); }  // NOLINT: float32 chapters
  Void* get() const { return p_; }

 private:
  Void* p_ = nullptr;
};
using InTensor = TensorPtr<const void>;
using OutTensor = TensorPtr<void>;

/// Device pointers of a forward pass. Q and O are B·H_q·N_q·d of the problem's dtype, K and
/// V B·H_kv·N_kv·d, lse is B·H_q·N_q float32; workspace is `workspace_bytes(p)` bytes (nullptr when that is 0). `layout` null:
/// Q, K, V, O contiguous [B, H, N, d] (the layout contract); else their strides, which only
/// an implementation marked `strided` reads (the C API refuses the others a layout).
struct ForwardArgs {
  InTensor Q;
  InTensor K;
  InTensor V;
  OutTensor O;
  float* lse;
  void* workspace;
  const Layout* layout = nullptr;
};

/// Device pointers of a backward pass: inputs Q, K, V, the forward's O and lse, the incoming
/// gradient dO; outputs dQ, dK, dV (every element written). The workspace is the same one
/// the paired forward saw (the materializing baseline keeps P there between the passes).
/// `layout` as in ForwardArgs (lse and the workspace are always the contract's).
struct BackwardArgs {
  InTensor Q;
  InTensor K;
  InTensor V;
  InTensor O;
  const float* lse;
  InTensor dO;
  OutTensor dQ;
  OutTensor dK;
  OutTensor dV;
  void* workspace;
  const Layout* layout = nullptr;
};

/// The strides a pass reads: args.layout's, or the contract's contiguous ones.
inline Layout layout_of(const Problem& p, const Layout* layout) {
  return layout ? *layout : contiguous_layout(p);
}

/// What an implementation computes beyond self-attention (len_q = len_kv, heads_q =
/// heads_kv, problem.hpp). The harness and the C API refuse the rest, saying what is
/// supported, before anything is allocated.
struct Features {
  bool lengths = false;  ///< len_q ≠ len_kv, the causal mask aligned either way
  bool grouped = false;  ///< heads_kv < heads_q: grouped-query and multi-query heads
};

using WorkspaceFn = size_t (*)(const Problem&);
using ForwardFn = void (*)(const Problem&, const ForwardArgs&, cudaStream_t);
using BackwardFn = void (*)(const Problem&, const BackwardArgs&, cudaStream_t);
using TrafficFn = std::vector<KernelTraffic> (*)(const Problem&);

/// One forward implementation of a chapter. `run` launches kernels on the stream and
/// returns without synchronising; it throws ft::CudaError on a launch failure.
struct ForwardImpl {
  std::string chapter;         ///< "01"
  std::string variant;         ///< "naive"
  std::string what;            ///< what this step changes, one short line
  std::vector<int> head_dims;  ///< supported d; empty means any d in [1, 1024]
  WorkspaceFn workspace_bytes;
  ForwardFn run;
  TrafficFn traffic;
  std::vector<DType> dtypes = {DType::Float32};  ///< element types it computes in
  int min_sm = 0;  ///< the compute capability it needs, ×10 (80: sm_80, Ampere); 0: any
  bool strided = false;  ///< reads ForwardArgs::layout: takes views (chapter 07)
  Features features = {};  ///< beyond self-attention; none by default
};

/// One backward implementation. `forward` is the forward pass it pairs with: it writes O,
/// lse and whatever the backward needs into the workspace; only `run` is timed.
struct BackwardImpl {
  std::string chapter;
  std::string variant;
  std::string what;
  std::vector<int> head_dims;
  WorkspaceFn workspace_bytes;
  ForwardFn forward;
  BackwardFn run;
  TrafficFn traffic;  ///< the backward's kernels only
  std::vector<DType> dtypes = {DType::Float32};
  int min_sm = 0;
  bool strided = false;  ///< reads BackwardArgs::layout (chapter 08)
  Features features = {};
};

/// A kernel's output failed verification (NaN/Inf, unwritten, or error over tolerance).
class WrongResult : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Throws ft::Unsupported unless d is in the list (empty list: 1 ≤ d ≤ 1024).
void check_head_dim(const std::vector<int>& head_dims, int d, const std::string& who);

/// Throws ft::Unsupported unless the problem's dtype is in the list.
void check_dtype(const std::vector<DType>& dtypes, DType t, const std::string& who);

/// Throws ft::Unsupported unless the problem asks only for what `f` lists (two lengths,
/// grouped heads), naming what is supported.
void check_features(const Features& f, const Problem& p, const std::string& who);

/// Everything an implementation checks before it touches the GPU: the problem is valid
/// (Problem::validate), its head dim, dtype and features (two lengths, grouped heads) are
/// supported. Throws ft::Unsupported.
void check_supported(const ForwardImpl& impl, const Problem& p);
void check_supported(const BackwardImpl& impl, const Problem& p);

/// Throws ft::Unsupported, before anything is allocated, when `bytes` will not fit in the
/// GPU's free memory; the message says how much is needed and how much is free.
void check_fits(size_t bytes, const std::string& what);

/// True when a CUDA GPU can be used; otherwise `why` says so first, "no CUDA GPU found", with
/// the runtime's own words in parentheses.
bool gpu_available(std::string* why = nullptr);

/// The name of device 0 ("NVIDIA H200").
std::string gpu_name();

struct MeasureConfig {
  int warmup = 3;
  int iters = 20;
  bool verify = true;
  bool flush_l2 = true;
  bool graph = false;  ///< each timed run a CUDA graph's replay (time_on_gpu)
  uint64_t seed = 2024;
  InputKind inputs = InputKind::Uniform;
};

/// Bytes of device memory a forward measurement allocates: Q, K, V, O, lse, workspace.
size_t forward_device_bytes(const ForwardImpl& impl, const Problem& p);
/// Likewise for a backward measurement (adds dO, dQ, dK, dV).
size_t backward_device_bytes(const BackwardImpl& impl, const Problem& p);

/// Checks, verifies and times one forward implementation on `p`; returns its row.
/// Verification compares sampled heads and rows against the float64 reference (all rows
/// when the problem is small); rel_err is the worst of O and lse.
Row measure_forward(const ForwardImpl& impl, const Problem& p, const MeasureConfig& cfg);

/// Likewise for a backward implementation: times `run` only, after its paired forward;
/// rel_err is the worst of dQ, dK and dV on the sampled heads; extra_mem_bytes is the
/// workspace, as the high-water mark of a memory pool that holds it alone.
Row measure_backward(const BackwardImpl& impl, const Problem& p, const MeasureConfig& cfg);

/// The model-only row of an implementation (no GPU needed): bytes, FLOPs, no timing.
Row predicted_row(const std::string& chapter, const std::string& variant, const std::string& what,
                  const std::string& pass, const Problem& p,
                  const std::vector<KernelTraffic>& kernels);

/// Prints a chapter's ledger: per kernel, requested and DRAM bytes, FLOPs, intensity.
void print_ledger(const std::string& title, const Problem& p,
                  const std::vector<KernelTraffic>& kernels, FILE* out = stdout);

}  // namespace ft
