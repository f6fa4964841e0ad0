// GPU tests of the tensor-core wrappers (common/sm80/), each a one-warp (or two-warp) kernel:
//   - S = Q·Kᵀ for 16 queries and 16 keys: cp.async into swizzled tiles, ldmatrix (.x4 and
//     .x2) into fragments, mma.sync, against a host product of the same rounded inputs;
//   - O = P·V: P converted from S's accumulators in registers, V through ldmatrix .trans;
//   - cp.async: rows past N zero-filled, and wait_group<1> lets the older group through;
//   - pack2: float → bf16/fp16 rounding and the order of the halves.
// Every test skips without a GPU, or on a GPU older than sm_80.
#include <gtest/gtest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "device/buffer.cuh"
#include "core/check.cuh"
#include "reference/inputs.hpp"
#include "sm80/cp_async.cuh"
#include "sm80/ldmatrix.cuh"
#include "sm80/mma.cuh"
#include "sm80/pack.cuh"
#include "harness/testing.hpp"
#include "tests/tensor_core_host.hpp"

namespace {

#define REQUIRE_SM80() FT_REQUIRE_CC(8, 1000, "needs sm_80 or newer (bf16 mma.sync, cp.async)")

using namespace ft::tc;

constexpr int kRows = 16;  ///< one m16 tile of queries, and 16 keys (two n8 tiles)
using ft::tc_test::as_float;
using ft::tc_test::bits_of;
using ft::tc_test::expect_product;
using ft::tc_test::kRelTol;
using ft::tc_test::random_elements;
using ft::tc_test::round_to;

// ---- Device side --------------------------------------------------------------------------

/// Writes accumulator `c` into a row-major float matrix (row stride ld) at corner (row0, col0).
__device__ void store_c(float* out, int ld, const FragC& c, int row0, int col0) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const RowCol p = mma_c_coord(lane_id(), i);
    out[(row0 + p.row) * ld + col0 + p.col] = c.c[i];
  }
}

/// Copies one [kRows][D] matrix into a swizzled shared tile with one warp, and waits for it.
template <int D, class T>
__device__ void load_tile_now(T* tile, const T* src) {
  copy_tile_async<SwizzledTile<D>, kRows, kLanes>(tile, src, 0, kRows);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
}

/// S (two n8 accumulator tiles) = Q·Kᵀ from swizzled tiles, d = D, k-step by k-step.
template <class T, int D, bool kX4>
__device__ void scores(FragC (&s)[2], const T* q, const T* k) {
  using Tile = SwizzledTile<D>;
#pragma unroll
  for (int k0 = 0; k0 < D; k0 += kMmaK) {
    FragA a;
    load_a<Tile>(a, q, 0, k0);
    FragB b[2];
    if constexpr (kX4) {
      load_b_x4<Tile>(b, k, 0, k0);
    } else {
      load_b<Tile>(b[0], k, 0, k0);      // keys 0-7
      load_b<Tile>(b[1], k, kMmaN, k0);  // keys 8-15
    }
    mma_m16n8k16<T>(s[0], a, b[0]);
    mma_m16n8k16<T>(s[1], a, b[1]);
  }
}

template <class T, int D, bool kX4>
__global__ void __launch_bounds__(kLanes) qk_kernel(const T* Q, const T* K, float* S) {
  __shared__ uint4 smem[2 * tile_bytes<SwizzledTile<D>>(kRows) / sizeof(uint4)];  // uint4: 16-byte aligned
  T* q = reinterpret_cast<T*>(smem);
  T* k = q + kRows * D;
  load_tile_now<D>(q, Q);
  load_tile_now<D>(k, K);
  FragC s[2] = {};
  scores<T, D, kX4>(s, q, k);
  store_c(S, kRows, s[0], 0, 0);
  store_c(S, kRows, s[1], 0, kMmaN);
}

/// S = Q·Kᵀ, then P = S rounded to T (as the A fragment, in registers), then O = P·V with V
/// read through ldmatrix .trans. Writes S, P (as the bits of T) and O.
template <class T, int D, bool kX4>
__global__ void __launch_bounds__(kLanes)
    pv_kernel(const T* Q, const T* K, const T* V, float* S, uint16_t* P, float* O) {
  using Tile = SwizzledTile<D>;
  __shared__ uint4 smem[3 * tile_bytes<Tile>(kRows) / sizeof(uint4)];
  T* q = reinterpret_cast<T*>(smem);
  T* k = q + kRows * D;
  T* v = k + kRows * D;
  load_tile_now<D>(q, Q);
  load_tile_now<D>(k, K);
  load_tile_now<D>(v, V);
  FragC s[2] = {};
  scores<T, D, kX4>(s, q, k);
  store_c(S, kRows, s[0], 0, 0);
  store_c(S, kRows, s[1], 0, kMmaN);

  const FragA p = a_from_accumulators<T>(s[0], s[1]);
#pragma unroll
  for (int i = 0; i < 8; ++i) {  // P as mma sees it: element i is half i%2 of register i/2
    const RowCol at = mma_a_coord(lane_id(), i);
    P[at.row * kRows + at.col] = uint16_t(p.r[i / kPair] >> (16 * (i % kPair)));
  }

#pragma unroll
  for (int n0 = 0; n0 < D; n0 += 2 * kMmaN) {  // 16 columns of d per step
    FragB b[2];
    if constexpr (kX4) {
      load_b_trans_x4<Tile>(b, v, 0, n0);
    } else {
      load_b_trans<Tile>(b[0], v, 0, n0);
      load_b_trans<Tile>(b[1], v, 0, n0 + kMmaN);
    }
    FragC o[2] = {};
    mma_m16n8k16<T>(o[0], p, b[0]);
    mma_m16n8k16<T>(o[1], p, b[1]);
    store_c(O, D, o[0], 0, n0);
    store_c(O, D, o[1], 0, n0 + kMmaN);
  }
}

constexpr int kCopyThreads = 2 * kLanes;  ///< two warps share the copies

/// Two tiles of rows [0, 16) and [16, 32) of a [N][D] matrix, in two cp.async groups, into
/// shared memory poisoned with 0xFFFF first; each read back (in logical order) as soon as
/// its group is known complete: the first after wait_group<1>, the second after <0>.
template <int D>
__global__ void __launch_bounds__(kCopyThreads)
    copy_kernel(const uint16_t* src, int N, uint16_t* first, uint16_t* second) {
  using Tile = SwizzledTile<D>;
  __shared__ uint4 smem[2 * tile_bytes<Tile>(kRows) / sizeof(uint4)];
  uint16_t* tile0 = reinterpret_cast<uint16_t*>(smem);
  uint16_t* tile1 = tile0 + kRows * D;
  for (int i = threadIdx.x; i < 2 * kRows * D; i += kCopyThreads) tile0[i] = 0xFFFF;  // both tiles
  __syncthreads();  // the poison is in place before any copy lands
  copy_tile_async<Tile, kRows, kCopyThreads>(tile0, src, 0, N);
  cp_async_commit();
  copy_tile_async<Tile, kRows, kCopyThreads>(tile1, src, kRows, N);
  cp_async_commit();

  cp_async_wait<1>();  // at most the newest group (the second tile) still in flight
  __syncthreads();
  for (int i = threadIdx.x; i < kRows * D; i += kCopyThreads) first[i] = tile0[Tile::offset(i / D, i % D)];
  cp_async_wait<0>();
  __syncthreads();
  for (int i = threadIdx.x; i < kRows * D; i += kCopyThreads) second[i] = tile1[Tile::offset(i / D, i % D)];
}

template <class T>
__global__ void pack_kernel(const float* lo, const float* hi, uint32_t* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = pack2<T>(lo[i], hi[i]);
}

// ---- The tests ----------------------------------------------------------------------------

template <class T, int D, bool kX4>
void check_qk(uint64_t seed) {
  SCOPED_TRACE(testing::Message() << "d = " << D << (kX4 ? ", B by ldmatrix.x4" : ", B by ldmatrix.x2"));
  const auto q = random_elements<T>(kRows * D, seed), k = random_elements<T>(kRows * D, seed + 1);
  ft::DeviceBuffer<T> dq(q.size()), dk(k.size());
  dq.upload(q), dk.upload(k);
  ft::DeviceBuffer<float> ds(kRows * kRows);
  ds.poison();
  qk_kernel<T, D, kX4><<<1, kLanes>>>(dq.get(), dk.get(), ds.get());
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaDeviceSynchronize());
  expect_product(ds.download(), kRows, kRows, D, [&](int m, int i) { return as_float(q[m * D + i]); },
                 [&](int i, int n) { return as_float(k[n * D + i]); }, "S = Q·Kᵀ");
}

template <class T>
void check_qk_all() {
  check_qk<T, 64, true>(11);
  check_qk<T, 64, false>(12);
  check_qk<T, 128, true>(13);
  check_qk<T, 128, false>(14);
}

TEST(TensorCoreMma, QKtBf16) {
  REQUIRE_SM80();
  check_qk_all<__nv_bfloat16>();
}

TEST(TensorCoreMma, QKtFp16) {
  REQUIRE_SM80();
  check_qk_all<__half>();
}

template <class T, int D, bool kX4>
void check_pv(uint64_t seed) {
  SCOPED_TRACE(testing::Message() << "d = " << D << (kX4 ? ", ldmatrix.x4.trans" : ", ldmatrix.x2.trans"));
  const auto q = random_elements<T>(kRows * D, seed), k = random_elements<T>(kRows * D, seed + 1),
             v = random_elements<T>(kRows * D, seed + 2);
  ft::DeviceBuffer<T> dq(q.size()), dk(k.size()), dv(v.size());
  dq.upload(q), dk.upload(k), dv.upload(v);
  ft::DeviceBuffer<float> ds(kRows * kRows), dout(kRows * D);
  ft::DeviceBuffer<uint16_t> dp(kRows * kRows);
  ds.poison(), dout.poison(), dp.poison();
  pv_kernel<T, D, kX4><<<1, kLanes>>>(dq.get(), dk.get(), dv.get(), ds.get(), dp.get(), dout.get());
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaDeviceSynchronize());
  const auto s = ds.download();
  const auto p = dp.download();
  // P must be S, element by element, rounded to nearest even: the conversion in registers
  // put every value in the right place and rounded it as the host does.
  for (int i = 0; i < kRows * kRows; ++i)
    ASSERT_EQ(p[i], bits_of(round_to<T>(s[i]))) << "P at (" << i / kRows << ", " << i % kRows << ")";
  expect_product(dout.download(), kRows, D, kRows, [&](int m, int j) { return as_float(round_to<T>(s[m * kRows + j])); },
                 [&](int j, int n) { return as_float(v[j * D + n]); }, "O = P·V");
}

template <class T>
void check_pv_all() {
  check_pv<T, 64, true>(21);
  check_pv<T, 64, false>(24);
  check_pv<T, 128, true>(27);
  check_pv<T, 128, false>(30);
}

TEST(TensorCoreLdmatrixTrans, PVBf16) {
  REQUIRE_SM80();
  check_pv_all<__nv_bfloat16>();
}

TEST(TensorCoreLdmatrixTrans, PVFp16) {
  REQUIRE_SM80();
  check_pv_all<__half>();
}

template <int D>
void check_copy() {
  SCOPED_TRACE(testing::Message() << "d = " << D);
  constexpr int N = kRows + 3;  // the second tile has 3 real rows and 13 past N
  std::vector<uint16_t> src(N * D);
  for (size_t i = 0; i < src.size(); ++i) src[i] = uint16_t(1 + (i * 40503u) % 0x7FFF);  // never 0
  ft::DeviceBuffer<uint16_t> dsrc(src.size()), first(kRows * D), second(kRows * D);
  dsrc.upload(src);
  copy_kernel<D><<<1, kCopyThreads>>>(dsrc.get(), N, first.get(), second.get());
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaDeviceSynchronize());
  const auto a = first.download(), b = second.download();
  for (int i = 0; i < kRows * D; ++i) {
    ASSERT_EQ(a[i], src[i]) << "first tile, row " << i / D << " col " << i % D;
    const int row = kRows + i / D;
    ASSERT_EQ(b[i], row < N ? src[row * D + i % D] : 0) << "second tile, row " << row << " col " << i % D;
  }
}

TEST(TensorCoreCpAsync, ZeroFillAndWaitGroup) {
  REQUIRE_SM80();
  check_copy<64>();
  check_copy<128>();
}

template <class T>
void check_pack(const std::vector<float>& lo, const std::vector<float>& hi) {
  const int n = int(lo.size());
  ft::DeviceBuffer<float> dlo(n), dhi(n);
  dlo.upload(lo), dhi.upload(hi);
  ft::DeviceBuffer<uint32_t> out(n);
  pack_kernel<T><<<1, 256>>>(dlo.get(), dhi.get(), out.get(), n);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaDeviceSynchronize());
  const auto got = out.download();
  for (int i = 0; i < n; ++i) {
    const uint32_t want = bits_of(round_to<T>(lo[i])) | uint32_t(bits_of(round_to<T>(hi[i]))) << 16;
    ASSERT_EQ(got[i], want) << "lo " << lo[i] << " hi " << hi[i];
  }
}

TEST(TensorCorePack, RoundsToNearestEvenLowHalfFirst) {
  REQUIRE_SM80();
  std::vector<float> lo = ft::random_uniform(200, 41, -3.f, 3.f), hi = ft::random_uniform(200, 42, -3.f, 3.f);
  // Ties (halfway between two neighbours, so "to even" decides): 1 + 2^-8 and 1 + 3·2^-8
  // for bf16 (7 fraction bits), 1 + 2^-11 and 1 + 3·2^-11 for fp16 (10); out of fp16's
  // range (1e5 → inf); below its smallest subnormal (1e-30 → 0).
  const std::vector<float> special = {1.f + 0x1p-8f, 1.f + 3 * 0x1p-8f, 1.f + 0x1p-11f, 1.f + 3 * 0x1p-11f,
                                      -1e5f, 1e-30f, 0.f, -0.f};
  for (float x : special) lo.push_back(x), hi.push_back(-x);
  check_pack<__nv_bfloat16>(lo, hi);
  check_pack<__half>(lo, hi);
}

}  // namespace
