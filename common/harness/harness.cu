/// @file harness.cu
/// Measuring an implementation: every program, the tour and the tests come through here.
#include "harness/harness.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>

#include "device/buffer.cuh"
#include "device/fill.cuh"
#include "core/check.cuh"
#include "device/launch.cuh"
#include "reference/reference.hpp"
#include "device/timer.cuh"
#include "harness/verify.hpp"

namespace ft {

void check_head_dim(const std::vector<int>& head_dims, int d, const std::string& who) {
  const bool ok = head_dims.empty()
                      ? (d >= 1 && d <= 1024)
                      : std::find(head_dims.begin(), head_dims.end(), d) != head_dims.end();
  if (ok) return;
  std::string list;
  for (int x : head_dims) list += (list.empty() ? "" : ", ") + std::to_string(x);
  throw Unsupported(who + " does not support head_dim " + std::to_string(d) +
                    " (supported: " + (list.empty() ? "1 to 1024" : list) + ")");
}

void check_dtype(const std::vector<DType>& dtypes, DType t, const std::string& who) {
  if (std::find(dtypes.begin(), dtypes.end(), t) != dtypes.end()) return;
  throw Unsupported(who + " does not support dtype " + dtype_name(t) + " (supported: " +
                    dtype_list(dtypes) + ")");
}

void check_features(const Features& f, const Problem& p, const std::string& who) {
  if (!p.same_lengths() && !f.lengths)
    throw Unsupported(who + " computes queries and keys of one length only: len_q " +
                      std::to_string(p.len_q) + " != len_kv " + std::to_string(p.len_kv) +
                      " (supported: len_q = len_kv)");
  if (p.grouped() && !f.grouped)
    throw Unsupported(who + " needs as many key/value heads as query heads: heads_kv " +
                      std::to_string(p.heads_kv) + " != heads_q " + std::to_string(p.heads_q) +
                      " (supported: heads_kv = heads_q; repeat K and V per query head, or use "
                      "an implementation that takes grouped heads)");
}

namespace {
template <class Impl>
void check_supported_impl(const Impl& impl, const Problem& p) {
  p.validate();
  const std::string who = "chapter " + impl.chapter + " (" + impl.variant + ")";
  check_head_dim(impl.head_dims, p.head_dim, who);
  check_dtype(impl.dtypes, p.dtype, who);
  check_features(impl.features, p, who);
}
}  // namespace

void check_supported(const ForwardImpl& impl, const Problem& p) { check_supported_impl(impl, p); }
void check_supported(const BackwardImpl& impl, const Problem& p) { check_supported_impl(impl, p); }

// `why` starts with what a reader needs to know, "no CUDA GPU found", and keeps CUDA's own
// words in parentheses ("driver version is insufficient" is how a machine without a GPU
// driver answers): the programs, the tour and the GPU tests' skips print it as it is.
bool gpu_available(std::string* why) {
  const auto no_gpu = [](const std::string& cuda) {
    return "no CUDA GPU found (CUDA: " + cuda + ")";
  };
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    if (why) *why = no_gpu(std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e));
    cudaGetLastError();  // clear the sticky error so later queries start clean
    return false;
  }
  if (count == 0) {
    if (why) *why = no_gpu("cudaGetDeviceCount found 0 devices");
    return false;
  }
  return true;
}

std::string gpu_name() {
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  return prop.name;
}

namespace {

/// The workspace of one measurement, allocated from a memory pool of its own, so that the
/// pool's allocator reports how much device memory the implementation needs beyond its
/// inputs and outputs: its high-water mark, in bytes (cudaMemGetInfo only sees 2 MiB pages).
class MeasuredWorkspace {
 public:
  explicit MeasuredWorkspace(size_t bytes) {
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    CUDA_CHECK(cudaMemPoolCreate(&pool_, &props));
    if (bytes > 0) {
      CUDA_CHECK(cudaMallocFromPoolAsync(&ptr_, bytes, pool_, 0));
      CUDA_CHECK(cudaStreamSynchronize(0));
    }
    uint64_t high = 0;
    CUDA_CHECK(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &high));
    peak_ = double(high);
  }
  ~MeasuredWorkspace() {
    if (ptr_) cudaFreeAsync(ptr_, 0);
    cudaStreamSynchronize(0);
    cudaMemPoolDestroy(pool_);
  }
  MeasuredWorkspace(const MeasuredWorkspace&) = delete;
  MeasuredWorkspace& operator=(const MeasuredWorkspace&) = delete;
  void* get() const { return ptr_; }
  double peak_bytes() const { return peak_; }  ///< as the pool's allocator counted it

 private:
  cudaMemPool_t pool_ = nullptr;
  void* ptr_ = nullptr;
  double peak_ = 0;
};

}  // namespace

void check_fits(size_t bytes, const std::string& what) {
  size_t free = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free, &total));
  // Headroom for what the harness adds (the L2-flush buffer, twice the L2: 120 MiB on an
  // H200) and the allocator's 2 MiB rounding of each buffer.
  constexpr size_t kHeadroom = size_t(256) << 20;
  if (bytes + kHeadroom <= free) return;
  throw Unsupported(what + " needs " + format_bytes(double(bytes)) +
                    " of device memory, but the GPU has " + format_bytes(double(free)) +
                    " free of " + format_bytes(double(total)) +
                    ": choose a smaller --seq-len or --batch");
}

size_t forward_device_bytes(const ForwardImpl& impl, const Problem& p) {
  return 2 * p.q_bytes() + 2 * p.kv_bytes() + size_t(p.rows()) * sizeof(float) +  // Q O, K V, lse
         impl.workspace_bytes(p);
}

size_t backward_device_bytes(const BackwardImpl& impl, const Problem& p) {
  return 4 * p.q_bytes() + 4 * p.kv_bytes() + size_t(p.rows()) * sizeof(float) +  // Q O dO dQ, K V dK dV
         impl.workspace_bytes(p);
}

Row predicted_row(const std::string& chapter, const std::string& variant, const std::string& what,
                  const std::string& pass, const Problem& p,
                  const std::vector<KernelTraffic>& kernels) {
  Row r;
  r.chapter = chapter;
  r.variant = variant;
  r.what = what;
  r.pass = pass;
  r.batch = p.batch;
  r.heads = p.heads_q;
  r.seq_len = p.len_q;
  r.heads_kv = p.heads_kv;
  r.len_kv = p.len_kv;
  r.causal_align = causal_align_name(p.align);
  r.head_dim = p.head_dim;
  r.causal = p.causal;
  r.dtype = dtype_name(p.dtype);
  const KernelTraffic t = total(kernels);
  r.model_bytes = t.dram_bytes();
  r.model_requested_bytes = t.requested_bytes();
  return r;
}

void print_ledger(const std::string& title, const Problem& p,
                  const std::vector<KernelTraffic>& kernels, FILE* out) {
  std::fprintf(out, "\n%s — memory ledger (model) at %s\n", title.c_str(), p.describe().c_str());
  std::fprintf(out, "  %-34s %11s %11s %11s %11s %11s %9s\n", "kernel", "read", "write",
               "DRAM read", "DRAM write", "FLOPs", "FLOP/B");
  auto line = [&](const KernelTraffic& k) {
    std::fprintf(out, "  %-34.34s %11s %11s %11s %11s %11.3g %9.2f\n", k.kernel.c_str(),
                 format_bytes(k.read_bytes).c_str(), format_bytes(k.write_bytes).c_str(),
                 format_bytes(k.dram_read_bytes).c_str(),
                 format_bytes(k.dram_write_bytes).c_str(), k.flops, k.intensity());
  };
  for (const auto& k : kernels) line(k);
  if (kernels.size() > 1) line(total(kernels));
  for (const auto& k : kernels)
    if (!k.note.empty()) std::fprintf(out, "    %s: %s\n", k.kernel.c_str(), k.note.c_str());
  const GpuFacts& g = gpu_facts();
  std::fprintf(out, "    (GPU facts of the model: %s: %.0f SMs, %s L2, %.0f threads per SM)\n",
               g.source.c_str(), g.sms, format_bytes(g.l2_bytes).c_str(), g.threads_per_sm);
}

namespace {

/// Which query rows of which heads the benchmark verification compares. Small problems:
/// all of them. Large ones: the first and last heads, and in each the first rows, the
/// last rows (partial tiles live there) and a block in the middle.
struct Sample {
  std::vector<int64_t> heads;
  std::vector<std::pair<int, int>> row_ranges;  // [begin, end)
};

Sample choose_sample(const Problem& p) {
  Sample s;
  const int N = p.len_q;
  const int64_t bh = p.heads_total();
  if (double(bh) * N * p.len_kv * p.head_dim <= 2e9) {  // a second or so of float64 work
    for (int64_t h = 0; h < bh; ++h) s.heads.push_back(h);
    s.row_ranges.push_back({0, N});
    return s;
  }
  s.heads = bh > 1 ? std::vector<int64_t>{0, bh - 1} : std::vector<int64_t>{0};
  constexpr int kEdge = 16;  // rows checked at each end and in the middle of a head
  if (N <= 3 * kEdge) {
    s.row_ranges.push_back({0, N});
  } else {
    s.row_ranges.push_back({0, kEdge});
    s.row_ranges.push_back({N / 2 - kEdge / 2, N / 2 + kEdge / 2});
    s.row_ranges.push_back({N - kEdge, N});
  }
  return s;
}

/// Reference O and lse on a sample, flattened in sample order. Cached for the last
/// problem, so the tour computes it once for all chapters on that problem.
struct ForwardSampleRef {
  std::string key;
  std::vector<double> O, lse;
};

const ForwardSampleRef& forward_sample_ref(const Problem& p, const Sample& s,
                                           const AttentionInputs& in, const std::string& key) {
  static ForwardSampleRef cache;
  if (cache.key == key) return cache;
  cache = ForwardSampleRef{};
  const int d = p.head_dim;
  for (int64_t h : s.heads)
    for (auto [b, e] : s.row_ranges) {
      std::vector<double> O(size_t(e - b) * d), lse(e - b);
      reference_forward_rows(p, in.Q.data(), in.K.data(), in.V.data(), h, b, e, O.data(),
                             lse.data());
      cache.O.insert(cache.O.end(), O.begin(), O.end());
      cache.lse.insert(cache.lse.end(), lse.begin(), lse.end());
    }
  cache.key = key;
  return cache;
}

std::string cache_key(const Problem& p, const MeasureConfig& cfg) {
  return p.describe() + " scale=" + std::to_string(p.softmax_scale()) + " seed=" +
         std::to_string(cfg.seed) + " kind=" + std::to_string(int(cfg.inputs));
}

/// Fails on any NaN/Inf anywhere in a whole output (the poison of an unwritten element).
VerifyResult all_finite(const char* name, const std::vector<float>& v) {
  VerifyResult r;
  r.ok = true;
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i])) {
      if (r.first_bad < 0) r.first_bad = int64_t(i);
      ++r.non_finite;
    }
  if (r.non_finite) {
    r.ok = false;
    r.message = std::string(name) + ": " + std::to_string(r.non_finite) + " of " +
                std::to_string(v.size()) + " values are NaN/Inf (first at index " +
                std::to_string(r.first_bad) + ": unwritten, or overflow)";
  }
  return r;
}

/// Verifies O and lse on the sample; returns the worst result.
VerifyResult verify_forward(const Problem& p, const AttentionInputs& in, const MeasureConfig& cfg,
                            const std::vector<float>& O, const std::vector<float>& lse) {
  // The lse of a row that sees no key is −∞ (problem.hpp): verify() below matches it exactly.
  VerifyResult bad = all_finite("O", O);
  if (!bad.ok) return bad;
  const Sample s = choose_sample(p);
  const ForwardSampleRef& ref = forward_sample_ref(p, s, in, cache_key(p, cfg));
  const int N = p.len_q, d = p.head_dim;
  std::vector<float> got_O, got_lse;
  for (int64_t h : s.heads)
    for (auto [b, e] : s.row_ranges) {
      got_O.insert(got_O.end(), O.begin() + (h * N + b) * d, O.begin() + (h * N + e) * d);
      got_lse.insert(got_lse.end(), lse.begin() + h * N + b, lse.begin() + h * N + e);
    }
  const double tol = fixed_tolerance(p.dtype);
  return worst(verify("O", got_O.data(), ref.O.data(), got_O.size(), tol),
               verify("lse", got_lse.data(), ref.lse.data(), got_lse.size(), tol));
}

/// Verifies dQ, dK, dV on whole key/value heads (each with the query heads that read it):
/// all of them when small, else the last one only (a float64 backward of one head at
/// N = 16384, d = 64 is ~9e10 multiply-adds).
VerifyResult verify_backward(const Problem& p, const AttentionInputs& in, const std::string& key,
                             const std::vector<float>& dQ, const std::vector<float>& dK,
                             const std::vector<float>& dV) {
  VerifyResult bad = worst(all_finite("dQ", dQ), worst(all_finite("dK", dK), all_finite("dV", dV)));
  if (!bad.ok) return bad;
  const int64_t q_head = int64_t(p.len_q) * p.head_dim, kv_head = int64_t(p.len_kv) * p.head_dim;
  const int64_t groups = p.kv_heads_total(), g = p.group();
  const bool all = double(p.heads_total()) * p.len_q * p.len_kv * p.head_dim <= 2e9;
  const int64_t first = all ? 0 : groups - 1;  // the first key/value head checked
  // The reference of the last problem is kept: the tour checks two backwards on it.
  static std::string cached_key;
  static std::vector<double> rq, rk, rv;
  if (cached_key != key) {
    rq.assign(size_t((groups - first) * g * q_head), 0);
    rk.assign(size_t((groups - first) * kv_head), 0);
    rv.assign(rk.size(), 0);
    std::vector<double> dk(static_cast<size_t>(kv_head)), dv(static_cast<size_t>(kv_head));
    for (int64_t h = first * g; h < groups * g; ++h) {
      reference_backward_head(p, in.Q.data(), in.K.data(), in.V.data(), in.dO.data(), h,
                              rq.data() + (h - first * g) * q_head, dk.data(), dv.data());
      const int64_t at = (p.kv_head(h) - first) * kv_head;
      for (int64_t x = 0; x < kv_head; ++x) rk[size_t(at + x)] += dk[size_t(x)], rv[size_t(at + x)] += dv[size_t(x)];
    }
    cached_key = key;
  }
  const double tol = fixed_tolerance(p.dtype);
  VerifyResult r = verify("dQ", dQ.data() + first * g * q_head, rq.data(), rq.size(), tol);
  r = worst(r, verify("dK", dK.data() + first * kv_head, rk.data(), rk.size(), tol));
  return worst(r, verify("dV", dV.data() + first * kv_head, rv.data(), rv.size(), tol));
}

std::string who(const std::string& chapter, const std::string& variant) {
  return "chapter " + chapter + " (" + variant + ")";
}

/// A measurement's inputs, into Q, K, V (and dO when given): the host's (make_inputs, the
/// numbers the float64 reference sees) when verifying; else drawn on the GPU in the same
/// ranges (device/fill.cuh), since a decode cache of tens of gigabytes takes minutes from the
/// host's generator and milliseconds on the GPU. The host's inputs, or none.
AttentionInputs load_inputs(const Problem& p, const MeasureConfig& cfg, DeviceTensor& Q, DeviceTensor& K,
                            DeviceTensor& V, DeviceTensor* dO = nullptr) {
  if (!cfg.verify) {
    const float a = cfg.inputs == InputKind::LargeScores ? large_score_factor(p.head_dim) : 1.f;
    const uint64_t s = cfg.seed * 0x2545F4914F6CDD1Dull;  // make_inputs' four streams, hashed instead
    fill_uniform(Q, s + 1, -a, a);
    fill_uniform(K, s + 2, -a, a);
    fill_uniform(V, s + 3, -1.f, 1.f);
    if (dO) fill_uniform(*dO, s + 4, -1.f, 1.f);
    return {};
  }
  AttentionInputs in = make_inputs(p, cfg.inputs, cfg.seed);
  Q.upload(in.Q);
  K.upload(in.K);
  V.upload(in.V);
  if (dO) dO->upload(in.dO);
  return in;
}

/// A measured row's time figures: the median, its spread, and the rates at the median.
void timed(Row& row, const Timing& t, double flops) {
  row.ms = t.median_ms;
  row.ms_min = t.min_ms;
  row.ms_max = t.max_ms;
  row.iters = t.iters;
  row.timing = t.column();
  row.tflops = flops / (t.median_ms * 1e-3) / 1e12;
  row.gbps = row.model_bytes / (t.median_ms * 1e-3) / 1e9;
}

}  // namespace

Row measure_forward(const ForwardImpl& impl, const Problem& p, const MeasureConfig& cfg) {
  const std::string name = who(impl.chapter, impl.variant);
  check_supported(impl, p);
  require_sm(impl.min_sm, name);
  check_fits(forward_device_bytes(impl, p), name + " on " + p.describe());

  const size_t n = size_t(p.elems()), kv = size_t(p.kv_elems());
  DeviceTensor Q(p.dtype, n), K(p.dtype, kv), V(p.dtype, kv), O(p.dtype, n);
  DeviceBuffer<float> lse(size_t(p.rows()));
  const AttentionInputs in = load_inputs(p, cfg, Q, K, V);
  const MeasuredWorkspace work(impl.workspace_bytes(p));
  const ForwardArgs args{Q.get(), K.get(), V.get(), O.get(), lse.get(), work.get()};

  Row row = predicted_row(impl.chapter, impl.variant, impl.what, "forward", p, impl.traffic(p));
  row.gpu = gpu_name();
  row.extra_mem_bytes = work.peak_bytes();

  O.poison();
  lse.poison();
  impl.run(p, args, 0);
  CUDA_CHECK(cudaDeviceSynchronize());
  if (cfg.verify) {
    const VerifyResult v = verify_forward(p, in, cfg, O.download(), lse.download());
    row.rel_err = v.rel_l2;
    if (!v.ok) throw WrongResult(name + " on " + p.describe() + ": " + v.message);
  }

  timed(row, time_on_gpu([&](cudaStream_t s) { impl.run(p, args, s); }, cfg.warmup,
                         cfg.iters, cfg.flush_l2, 0, cfg.graph),
        p.forward_flops());
  return row;
}

Row measure_backward(const BackwardImpl& impl, const Problem& p, const MeasureConfig& cfg) {
  const std::string name = who(impl.chapter, impl.variant);
  check_supported(impl, p);
  require_sm(impl.min_sm, name);
  check_fits(backward_device_bytes(impl, p), name + " on " + p.describe());

  const size_t n = size_t(p.elems()), kv = size_t(p.kv_elems());
  DeviceTensor Q(p.dtype, n), K(p.dtype, kv), V(p.dtype, kv), O(p.dtype, n), dO(p.dtype, n),
      dQ(p.dtype, n), dK(p.dtype, kv), dV(p.dtype, kv);
  DeviceBuffer<float> lse(size_t(p.rows()));
  const AttentionInputs in = load_inputs(p, cfg, Q, K, V, &dO);
  const MeasuredWorkspace work(impl.workspace_bytes(p));
  const ForwardArgs fa{Q.get(), K.get(), V.get(), O.get(), lse.get(), work.get()};
  const BackwardArgs ba{Q.get(),  K.get(),  V.get(),  O.get(),  lse.get(),
                        dO.get(), dQ.get(), dK.get(), dV.get(), work.get()};

  Row row = predicted_row(impl.chapter, impl.variant, impl.what, "backward", p, impl.traffic(p));
  row.gpu = gpu_name();
  row.extra_mem_bytes = work.peak_bytes();

  O.poison();
  lse.poison();
  dQ.poison();
  dK.poison();
  dV.poison();
  impl.forward(p, fa, 0);
  impl.run(p, ba, 0);
  CUDA_CHECK(cudaDeviceSynchronize());
  if (cfg.verify) {
    VerifyResult v = verify_forward(p, in, cfg, O.download(), lse.download());
    if (v.ok) v = worst(v, verify_backward(p, in, cache_key(p, cfg), dQ.download(), dK.download(), dV.download()));
    row.rel_err = v.rel_l2;
    if (!v.ok) throw WrongResult(name + " on " + p.describe() + ": " + v.message);
  }

  timed(row, time_on_gpu([&](cudaStream_t s) { impl.run(p, ba, s); }, cfg.warmup,
                         cfg.iters, cfg.flush_l2, 0, cfg.graph),
        p.backward_flops());
  return row;
}

}  // namespace ft
