// GPU tests of Hopper's wgmma wrappers (common/sm90/), each one warpgroup on one tile:
//   - S = Q·Kᵀ: Q [64][K] and K [N][K] in 128-byte-swizzled panels, both K-major, the
//     product over K/16 k-steps from shared-memory descriptors;
//   - O = P·V: P from registers in mma.sync's A layout, V [K][N] MN-major (transposed B),
//     as chapter 09's second product reads it;
//   - D = A·Bᵀ with A MN-major (stored transposed, [K][64]), as a backward's dQ = dS·K reads
//     the dSᵀ tile it stored.
// Against a host product of the same rounded inputs, every output element checked (outputs
// poisoned first), for bf16 and fp16 and N = 64, 128, K = 64, 128. Built for sm_90a only;
// every test skips without a GPU or on a GPU other than Hopper (sm_90).
#include <gtest/gtest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/check.cuh"
#include "device/buffer.cuh"
#include "harness/testing.hpp"
#include "tests/tensor_core_host.hpp"
#include "reference/inputs.hpp"
#include "sm90/smem_layout.hpp"
#include "sm90/wgmma.cuh"

namespace {

#define REQUIRE_SM90() FT_REQUIRE_CC(9, 9, "needs Hopper (sm_90): wgmma")

using namespace ft::sm90;

constexpr int kM = kMmaM;  ///< one warpgroup's 64 rows
/// The shared-memory window: dynamic shared memory rounded up to the 1024 bytes a
/// swizzled panel must start on.
__device__ uint8_t* aligned_smem() {
  extern __shared__ uint8_t smem_raw[];
  return align_shared(smem_raw);
}
__device__ uint32_t smem_addr(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

/// Row-major [ROWS][COLS] from global memory into a Sw128Tile, element by element.
template <class Tile, class T>
__device__ void store_tile(T* tile, const T* src) {
  for (int e = threadIdx.x; e < Tile::kRows * Tile::kCols; e += blockDim.x)
    tile[Tile::offset(e / Tile::kCols, e % Tile::kCols)] = src[e];
}

template <int N>
__device__ void write_acc(float* out, const float (&d)[N / 2]) {
#pragma unroll
  for (int i = 0; i < N / 2; ++i) out[acc_row(threadIdx.x, i) * N + acc_col(threadIdx.x, i)] = d[i];
}

/// out[64][N] = Q[64][K] · Kmat[N][K]ᵀ.
template <class T, int N, int K>
__global__ void qk_kernel(const T* q, const T* k, float* out) {
  using QTile = Sw128Tile<kM, K>;
  using KTile = Sw128Tile<N, K>;
  T* sq = reinterpret_cast<T*>(aligned_smem());
  T* sk = sq + QTile::kBytes / sizeof(T);
  store_tile<QTile>(sq, q);
  store_tile<KTile>(sk, k);
  fence_proxy_async();  // the stores above, before the tensor cores read the tiles
  __syncthreads();
  float d[N / 2];
  fence();
#pragma unroll
  for (int ks = 0; ks < K / kMmaK; ++ks)
    mma_ss<T, N>(d, k_major_descriptor<QTile>(smem_addr(sq), ks),
                 k_major_descriptor<KTile>(smem_addr(sk), ks), /*accumulate=*/ks > 0);
  commit();
  wait<0>();
  fence_registers(d);
  write_acc<N>(out, d);
}

/// out[64][N] = A[64][K] · Bm[N][K]ᵀ with A stored transposed (At[K][64], MN-major: the
/// backward's dQ = dS·K reads dS so, from the dSᵀ tile it stored).
template <class T, int N, int K>
__global__ void transposed_a_kernel(const T* at, const T* b, float* out) {
  using ATile = Sw128Tile<K, kM>;  // K rows (k) × 64 columns (m): one panel
  using BTile = Sw128Tile<N, K>;
  T* sa = reinterpret_cast<T*>(aligned_smem());
  T* sb = sa + ATile::kBytes / sizeof(T);
  store_tile<ATile>(sa, at);
  store_tile<BTile>(sb, b);
  fence_proxy_async();
  __syncthreads();
  float d[N / 2];
  fence();
#pragma unroll
  for (int ks = 0; ks < K / kMmaK; ++ks)
    mma_ss<T, N, /*kTransB=*/false, /*kTransA=*/true>(d, mn_major_descriptor<ATile>(smem_addr(sa), ks),
                                                      k_major_descriptor<BTile>(smem_addr(sb), ks), ks > 0);
  commit();
  wait<0>();
  fence_registers(d);
  write_acc<N>(out, d);
}

/// out[64][N] = P[64][K] · V[K][N], P from registers, V MN-major.
template <class T, int N, int K>
__global__ void pv_kernel(const T* p, const T* v, float* out) {
  using VTile = Sw128Tile<K, N>;
  T* sv = reinterpret_cast<T*>(aligned_smem());
  store_tile<VTile>(sv, v);
  fence_proxy_async();
  __syncthreads();
  // mma.sync's A layout for this warp's 16 rows (sm80/fragment.hpp): lane l holds rows
  // l/4 and l/4 + 8, columns 2(l%4), +1 and those + 8, of each 16-column k-step.
  const int t = threadIdx.x, r = t / 32 * 16 + t % 32 / 4, c = t % 4 * 2;
  // Two neighbouring columns are one 32-bit word of the row-major P.
  auto word = [&](int row, int col) { return *reinterpret_cast<const uint32_t*>(p + row * K + col); };
  float d[N / 2];
  fence();
#pragma unroll
  for (int ks = 0; ks < K / kMmaK; ++ks) {
    const int c0 = ks * kMmaK + c;
    const uint32_t a[4] = {word(r, c0), word(r + 8, c0), word(r, c0 + 8), word(r + 8, c0 + 8)};
    mma_rs<T, N, /*kTransB=*/true>(d, a, mn_major_descriptor<VTile>(smem_addr(sv), ks), ks > 0);
  }
  commit();
  wait<0>();
  fence_registers(d);
  write_acc<N>(out, d);
}

// ---- Host side ------------------------------------------------------------------------

using ft::tc_test::as_float;
using ft::tc_test::expect_product;
using ft::tc_test::random_elements;

/// Runs `kernel(a, b, out)` on one warpgroup with `smem` bytes of shared memory, a and b
/// uploaded, out (64 × N floats) poisoned first; returns out.
template <int N, class T, class Kernel>
std::vector<float> run_product(Kernel kernel, const std::vector<T>& a, const std::vector<T>& b, size_t smem) {
  ft::DeviceBuffer<T> da(a.size()), db(b.size());
  ft::DeviceBuffer<float> dout(size_t(kM) * N);
  da.upload(a);
  db.upload(b);
  dout.poison();
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  kernel<<<1, kWarpgroupThreads, smem>>>(da.get(), db.get(), dout.get());
  CUDA_CHECK(cudaGetLastError());
  return dout.download();
}

template <class T, int N, int K>
void check_qk() {
  REQUIRE_SM90();
  const auto q = random_elements<T>(size_t(kM) * K, 11), k = random_elements<T>(size_t(N) * K, 12);
  const auto out = run_product<N>(qk_kernel<T, N, K>, q, k,
                                  kAtomBytes + Sw128Tile<kM, K>::kBytes + Sw128Tile<N, K>::kBytes);
  expect_product(out, kM, N, K, [&](int i, int kk) { return as_float(q[size_t(i) * K + kk]); },
                 [&](int kk, int j) { return as_float(k[size_t(j) * K + kk]); }, "S = Q·Kᵀ");
}

template <class T, int N, int K>
void check_pv() {
  REQUIRE_SM90();
  const auto p = random_elements<T>(size_t(kM) * K, 21), v = random_elements<T>(size_t(K) * N, 22);
  const auto out = run_product<N>(pv_kernel<T, N, K>, p, v, kAtomBytes + Sw128Tile<K, N>::kBytes);
  expect_product(out, kM, N, K, [&](int i, int kk) { return as_float(p[size_t(i) * K + kk]); },
                 [&](int kk, int j) { return as_float(v[size_t(kk) * N + j]); }, "O = P·V");
}

template <class T, int N, int K>
void check_transposed_a() {
  REQUIRE_SM90();
  const auto at = random_elements<T>(size_t(K) * kM, 31), b = random_elements<T>(size_t(N) * K, 32);
  const auto out = run_product<N>(transposed_a_kernel<T, N, K>, at, b,
                                  kAtomBytes + Sw128Tile<K, kM>::kBytes + Sw128Tile<N, K>::kBytes);
  expect_product(out, kM, N, K, [&](int i, int kk) { return as_float(at[size_t(kk) * kM + i]); },
                 [&](int kk, int j) { return as_float(b[size_t(j) * K + kk]); }, "D = A·Bᵀ, A MN-major");
}

TEST(Wgmma, QKt_bf16_N64_K64) { check_qk<__nv_bfloat16, 64, 64>(); }
// A MN-major (transposed in shared memory), as the backward's dQ = dS·K will read dS.
TEST(Wgmma, TransposedA_bf16_N128_K64) { check_transposed_a<__nv_bfloat16, 128, 64>(); }
TEST(Wgmma, TransposedA_fp16_N64_K128) { check_transposed_a<__half, 64, 128>(); }
TEST(Wgmma, QKt_bf16_N128_K64) { check_qk<__nv_bfloat16, 128, 64>(); }
TEST(Wgmma, QKt_bf16_N128_K128) { check_qk<__nv_bfloat16, 128, 128>(); }
TEST(Wgmma, QKt_fp16_N64_K128) { check_qk<__half, 64, 128>(); }
TEST(Wgmma, PV_bf16_N64_K64) { check_pv<__nv_bfloat16, 64, 64>(); }
TEST(Wgmma, PV_bf16_N128_K64) { check_pv<__nv_bfloat16, 128, 64>(); }
TEST(Wgmma, PV_bf16_N128_K128) { check_pv<__nv_bfloat16, 128, 128>(); }
TEST(Wgmma, PV_fp16_N64_K128) { check_pv<__half, 64, 128>(); }

}  // namespace
