/// @file traffic.cpp
#include "harness/traffic.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

namespace ft {

GpuFacts h200_facts() { return GpuFacts{}; }

const GpuFacts& gpu_facts() {
  static const GpuFacts facts = [] {
    GpuFacts f = h200_facts();
    int count = 0;
    cudaDeviceProp prop{};
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0 ||
        cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
      cudaGetLastError();  // no GPU: clear the error, keep the defaults
      return f;
    }
    f.sms = prop.multiProcessorCount;
    f.l2_bytes = prop.l2CacheSize;
    f.threads_per_sm = prop.maxThreadsPerMultiProcessor;
    f.smem_per_sm = double(prop.sharedMemPerMultiprocessor);
    f.source = std::string(prop.name) + " (device 0)";
    return f;
  }();
  return facts;
}

KernelTraffic total(const std::vector<KernelTraffic>& kernels, const std::string& name) {
  KernelTraffic t;
  t.kernel = name;
  for (const auto& k : kernels) {
    t.read_bytes += k.read_bytes;
    t.write_bytes += k.write_bytes;
    t.dram_read_bytes += k.dram_read_bytes;
    t.dram_write_bytes += k.dram_write_bytes;
    t.flops += k.flops;
  }
  return t;
}

double tiled_matmul_read_bytes(double M, double N, double K, int tile_m, int tile_n) {
  const double blocks_along_n = std::ceil(N / tile_n);  // each re-reads its rows of A
  const double blocks_along_m = std::ceil(M / tile_m);  // each re-reads its columns of B
  return matrix_bytes(M, K) * blocks_along_n + matrix_bytes(K, N) * blocks_along_m;
}

double visible_pairs(const Problem& p) {
  const double nq = p.len_q, nk = p.len_kv;
  if (!p.causal) return nq * nk;
  if (p.same_lengths()) return nq * (nq + 1) / 2;
  double pairs = 0;
  for (int i = 0; i < p.len_q; ++i) pairs += p.visible_keys(i);
  return pairs;
}

double visited_tile_fraction(const Problem& p, int tile_q, int tile_k) {
  if (!p.causal) return 1.0;
  const int64_t nq = p.len_q, nk = p.len_kv;
  const int64_t tq = (nq + tile_q - 1) / tile_q, tk = (nk + tile_k - 1) / tile_k;
  int64_t visited = 0;
  for (int64_t i = 0; i < tq; ++i) {
    // query tile i holds rows [i·tile_q, min(nq, (i+1)·tile_q)); its last row sees keys
    // [0, visible_keys(last_row)), so the key tiles 0 … ceil(that / tile_k) − 1 are visited.
    const int last_row = int(std::min(nq, (i + 1) * tile_q) - 1);
    visited += (p.visible_keys(last_row) + tile_k - 1) / tile_k;
  }
  return double(visited) / double(tq * tk);
}

double kv_rows_loaded(const Problem& p, int Br, int Bc) {
  const int Nq = p.len_q, Nk = p.len_kv;
  double rows = 0;
  for (int q0 = 0; q0 < Nq; q0 += Br) {
    // The keys the tile's last query sees (problem.hpp): all N_kv, or causal a prefix.
    const int kv_end = p.causal ? int(std::clamp<int64_t>(int64_t(q0) + Br + p.causal_offset(), 0, Nk)) : Nk;
    rows += std::min(Nk, ceil_div(kv_end, Bc) * Bc);
  }
  return rows;
}

KernelTraffic fused_forward_traffic(const Problem& p, const char* kernel, int Br, int Bc) {
  const double heads = double(p.heads_total()), d = p.head_dim;
  const double q_head = matrix_bytes(p, p.len_q, d);    // one query head's Q (or O)
  const double kv_head = matrix_bytes(p, p.len_kv, d);  // one key/value head's K (or V)
  KernelTraffic t;
  t.kernel = kernel;
  t.read_bytes = heads * (q_head + 2 * matrix_bytes(p, kv_rows_loaded(p, Br, Bc), d));
  t.write_bytes = heads * (q_head + matrix_bytes(p.len_q, 1));  // O, and lse in float32
  // A key/value head's K and V are re-read by its query tiles and, grouped, by the query
  // heads that share it, all of which run at about the same time (blocks are numbered head
  // by head).
  const bool kv_in_l2 = fits_l2(2 * kv_head);
  t.dram_read_bytes =
      kv_in_l2 ? heads * q_head + double(p.kv_heads_total()) * 2 * kv_head : t.read_bytes;
  t.dram_write_bytes = t.write_bytes;
  t.flops = p.forward_flops();
  t.note = kv_in_l2 ? "K/V re-reads hit L2 (a head's K+V fits; its query tiles run together): "
                      "Q, K, V, O, lse cross DRAM once"
                    : "a head's K+V exceeds the L2 share: every K/V re-read counted as DRAM";
  return t;
}

}  // namespace ft
