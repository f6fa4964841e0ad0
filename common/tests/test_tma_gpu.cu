// Tests of Hopper's bulk tensor copy (common/sm90/tma.hpp, mbarrier.cuh), one block at a
// time, before any kernel relies on them:
//   - a box of a [B][H][N][d] tensor lands in shared memory as the 128-byte-swizzled panels
//     wgmma reads (Sw128Tile), every element where Sw128Tile::offset says, rows past N zero;
//   - one barrier reused for several boxes in turn: its phase parity alternates 0, 1, 0, ...;
//   - views: the rows of a head interleaved with the other heads' ([B][N][H][d]), one head,
//     one batch (the strides the map substitutes for a dimension of one);
//   - what the copy engine cannot read is refused on the host, with a message (no GPU needed).
// Every output element is compared (outputs poisoned first). Built for sm_90a only; the GPU
// tests skip without a GPU or on a GPU other than Hopper (sm_90).
#include <gtest/gtest.h>

#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/check.cuh"
#include "device/buffer.cuh"
#include "harness/testing.hpp"
#include "sm90/mbarrier.cuh"
#include "sm90/smem_layout.hpp"
#include "sm90/tma.hpp"
#include "sm90/wgmma.cuh"  // fence_proxy_async

namespace {

#define REQUIRE_SM90() FT_REQUIRE_CC(9, 9, "needs Hopper (sm_90): the bulk tensor copy")

using namespace ft::sm90;

constexpr int kThreads = 128;

/// `rounds` boxes of Tile::kRows × d, rows row0, row0 + kRows, ..., of head (head, batch),
/// each brought by the copy engine into one swizzled tile on one barrier (phase r % 2 for
/// round r), then read back by every thread through Sw128Tile::offset into
/// out[round][row][col]: whatever the copy engine put where, the test sees it.
template <class Tile>
__global__ void copy_boxes(const __grid_constant__ CUtensorMap map, int row0, int head, int batch, int rounds,
                           uint16_t* out) {
  extern __shared__ uint8_t smem_raw[];
  __shared__ uint64_t bar;
  uint16_t* tile = reinterpret_cast<uint16_t*>(align_shared(smem_raw));
  if (threadIdx.x == 0) barrier_init(&bar, 1);
  __syncthreads();
  for (int r = 0; r < rounds; ++r) {
    if (threadIdx.x == 0) {
      arrive_expect_tx(&bar, Tile::kBytes);
      for (int pnl = 0; pnl < Tile::kPanels; ++pnl)
        copy_box(tile + pnl * Tile::kPanelElems, &map, pnl * kPanelCols, row0 + r * Tile::kRows, head, batch, &bar);
    }
    wait(&bar, r % 2);
    uint16_t* o = out + size_t(r) * Tile::kRows * Tile::kCols;
    for (int e = threadIdx.x; e < Tile::kRows * Tile::kCols; e += blockDim.x)
      o[e] = tile[Tile::offset(e / Tile::kCols, e % Tile::kCols)];
    // These ordinary reads of the tile, before the copy engine (async proxy) overwrites it.
    fence_proxy_async();
    __syncthreads();
  }
}

/// Element (b, h, n, c)'s value: distinct small integers, exact in bf16 and fp16 (|v| < 256),
/// as raw 16-bit patterns of the dtype.
uint16_t value_bits(ft::DType dt, int b, int h, int n, int c) {
  const float v = float((((b * 7 + h) * 131 + n) * 17 + c) % 255 - 127);
  if (dt == ft::DType::BFloat16) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    return uint16_t(u >> 16);  // exact: these integers need at most 8 significant bits
  }
  const __half hv = __float2half(v);
  uint16_t bits;
  std::memcpy(&bits, &hv, 2);
  return bits;
}

struct Case {
  ft::DType dtype;
  int batch, heads, rows;
  bool interleaved;  ///< [B][N][H][d] (a head's rows H·d apart) instead of [B][H][N][d]
  int row0, head, b, rounds;
};

template <int D, int kBoxRows>
void check(const Case& c) {
  REQUIRE_SM90();
  using Tile = Sw128Tile<kBoxRows, D>;
  ft::Strides s;
  if (c.interleaved) s = {int64_t(c.rows) * c.heads * D, D, int64_t(c.heads) * D};
  else s = {int64_t(c.heads) * c.rows * D, int64_t(c.rows) * D, D};
  std::vector<uint16_t> host(size_t(c.batch) * c.heads * c.rows * D);
  for (int b = 0; b < c.batch; ++b)
    for (int h = 0; h < c.heads; ++h)
      for (int n = 0; n < c.rows; ++n)
        for (int col = 0; col < D; ++col)
          host[b * s.batch + h * s.head + n * s.row + col] = value_bits(c.dtype, b, h, n, col);
  ft::DeviceBuffer<uint16_t> src(host.size()), out(size_t(c.rounds) * kBoxRows * D);
  src.upload(host);
  out.poison();
  const CUtensorMap map = tensor_map(src.get(), c.dtype, c.batch, c.heads, c.rows, D, s, kBoxRows);
  const size_t smem = kAtomBytes + Tile::kBytes;
  CUDA_CHECK(cudaFuncSetAttribute(copy_boxes<Tile>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  copy_boxes<Tile><<<1, kThreads, smem>>>(map, c.row0, c.head, c.b, c.rounds, out.get());
  CUDA_CHECK(cudaGetLastError());
  const std::vector<uint16_t> got = out.download();  // synchronizes: a fault surfaces here
  int wrong = 0;
  for (int r = 0; r < c.rounds; ++r)
    for (int row = 0; row < kBoxRows; ++row)
      for (int col = 0; col < D; ++col) {
        const int n = c.row0 + r * kBoxRows + row;
        const uint16_t want = n < c.rows ? value_bits(c.dtype, c.b, c.head, n, col) : 0;  // +0.0: zero fill
        const uint16_t have = got[(size_t(r) * kBoxRows + row) * D + col];
        if (have != want && ++wrong <= 5)
          ADD_FAILURE() << "round " << r << ", row " << n << ", column " << col << ": 0x" << std::hex << have
                        << ", want 0x" << want;
      }
  EXPECT_EQ(wrong, 0) << "elements wrong of " << c.rounds * kBoxRows * D;
}

// One panel (d = 64), a box inside the tensor, then one that runs past N (rows 192-255 of
// 200), then one wholly past it; three rounds on one barrier: parities 0, 1, 0.
TEST(Tma, Bf16_D64_ThreeRoundsPastTheEnd) { check<64, 64>({ft::DType::BFloat16, 2, 3, 200, false, 128, 2, 1, 3}); }
// Two panels (d = 128), 128-row boxes as chapter 09 reads K and V; fp16.
TEST(Tma, Fp16_D128_Box128) { check<128, 128>({ft::DType::Float16, 2, 3, 300, false, 0, 1, 1, 3}); }
// A head's rows interleaved with the other heads' (q of a [B, N, H, d] projection).
TEST(Tma, Bf16_D128_InterleavedHeads) { check<128, 64>({ft::DType::BFloat16, 2, 4, 97, true, 17, 3, 1, 2}); }
// One head and one batch: the map's strides for dimensions of one element.
TEST(Tma, Bf16_D64_OneHeadOneBatch) { check<64, 128>({ft::DType::BFloat16, 1, 1, 17, false, 0, 0, 0, 1}); }

// ---- Refusals, on the host (no GPU needed: the checks come before the driver) ---------

std::string refusal(const void* base, ft::Strides s) {
  try {
    tensor_map(base, ft::DType::BFloat16, 2, 3, 100, 64, s, 64);
  } catch (const ft::Unsupported& e) {
    return e.what();
  }
  return "";
}

TEST(TmaRefuses, MisalignedStartOrStrides) {
  const ft::Strides ok{3 * 100 * 64, 100 * 64, 64};
  const void* aligned = reinterpret_cast<const void*>(uintptr_t(1) << 20);
  const void* off_by_one = reinterpret_cast<const void*>((uintptr_t(1) << 20) + 2);  // one element in
  EXPECT_NE(refusal(off_by_one, ok).find("multiples of 16 bytes"), std::string::npos);
  EXPECT_NE(refusal(aligned, {ok.batch, ok.head, 68}).find("multiples of 16 bytes"), std::string::npos);
  EXPECT_NE(refusal(aligned, {ok.batch, ok.head + 4, ok.row}).find("multiples of 16 bytes"), std::string::npos);
}

TEST(TmaRefuses, OtherDtypes) {
  try {
    tensor_map(nullptr, ft::DType::Float32, 1, 1, 16, 64, {1024, 1024, 64}, 16);
    ADD_FAILURE() << "float32 accepted";
  } catch (const ft::Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("bf16 or fp16"), std::string::npos) << e.what();
  }
}

}  // namespace
