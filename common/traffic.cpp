/// @file traffic.cpp
#include "traffic.hpp"

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

}  // namespace ft
