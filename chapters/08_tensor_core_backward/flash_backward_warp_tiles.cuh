/// @file flash_backward_warp_tiles.cuh
/// @brief Variant `warp_tiles`: chapter 08's backward with Pᵀ and dSᵀ through shared memory,
/// so that every product gives each warp a tile 32 rows tall (FlashAttention-2's layout).
///
/// What changed from `async` (flash_backward_tc.cuh), and why. There, warp w owns 16 keys
/// and keeps Pᵀ and dSᵀ in registers as the A operands of dV and dK: no shared memory for
/// them, but every product is 16 rows tall, and a 16-row warp tile reads its B operand (all
/// Br queries of Q or dO, all d columns of dO or Q) for only one mma row. Nsight Compute
/// (profiles/profile_ch08_async_d128.txt) shows the cost: ldmatrix keeps the shared-memory
/// pipe 74-81% busy while the tensor cores are 34-36% busy; 104 ldmatrix.x4 per 160 mma
/// per warp and query tile at d = 128.
///
/// Here a block of 8 warps owns Bc = 128 keys, and each product is split over the warps
/// its own way, every warp tile 32 rows (two mma rows) tall:
///
///     product         C tile [rows × cols]   warps (rows × cols)   a warp's tile
///     Sᵀ  = K·Qᵀ      Bc × Br                4 × 2                 32 keys × Br/2 queries
///     dPᵀ = V·dOᵀ     Bc × Br                4 × 2                 (the same)
///     dV += Pᵀ·dO     Bc × d                 4 × 2                 32 keys × d/2
///     dK += dSᵀ·Q     Bc × d                 4 × 2                 32 keys × d/2
///     dQ  = dS·K      Br × d                 Br/32 × 8·32/Br       32 queries × the rest
///
/// The warp that computes a piece of Pᵀ is not the one that needs it as an A operand
/// (dV's warp needs all Br queries of its keys, Sᵀ's warp has half of them), so Pᵀ and dSᵀ
/// go to shared memory ([key][query] tiles), and after one barrier every warp reads what its
/// tile of dV, dK and dQ needs: Pᵀ and dSᵀ as stored (ldmatrix), dS transposed
/// (ldmatrix.trans). The count per warp and query tile, d = 128 (Br = 64): Sᵀ and dPᵀ 32
/// ldmatrix.x4 each, dV and dK 24 each, dQ 32: 144 for 320 mma, 0.45 per mma where `async`
/// needs 0.65, plus 32 32-bit stores of Pᵀ and dSᵀ. At d = 64 (Br = 128): 144 for 320
/// mma, 0.45 against 0.60, plus 64 stores.
///
/// Run: ./build/chapters/08_tensor_core_backward/ch08_tensor_core_backward --variant warp_tiles
#pragma once

#include "core/limits.hpp"  // ft::kMaxSmemPerBlock
#include "08_tensor_core_backward/flash_backward_tc.cuh"  // Params, dot_dO_O_tc, convert_dq
#include "schedule/tail_split.hpp"

#include <type_traits>

namespace ch08 {

// The plan of the tail split (common/schedule/tail_split.hpp).
using ft::schedule::kMaxCutTiles;
using ft::schedule::plan_tail_split;
using ft::schedule::slot_capacity;
using ft::schedule::TailSplit;

/// The warp_tiles kernel's shape. Br: 128 queries at d = 64 and 64 at d = 128, so that the
/// warps' accumulators (Sᵀ, dPᵀ, dK, dV) fit 255 registers either way (static_assert below).
template <class Element, int D_>
struct WarpTileTraits {
  using T = Element;
  static constexpr int D = D_;
  static constexpr int Br = D == 64 ? 128 : 64;  ///< queries per query tile
  static constexpr int Bc = 128;                 ///< keys per block: 4 warp rows of 32
  static constexpr int kWarps = 8;
  static constexpr int kThreads = kWarps * ft::tc::kLanes;
  static constexpr Copy kCopy = Copy::kAsync;  ///< the next query tile lands while this one is used
  static constexpr DQ kDq = DQ::kAtomics;
  static constexpr int kStages = 2;
  using Tile = ft::tc::SwizzledTile<D>;   ///< Q, dO, K, V: rows of d elements
  /// Contiguous tensors (the layout contract); ft::Views<...> of these traits read views.
  static constexpr bool kViews = false;
  using PdsTile = ft::tc::SwizzledTile<Br>;  ///< Pᵀ, dSᵀ: [key][query], rows of Br elements

  /// Where each warp's tiles are: transposed_fragments.hpp, warp_tile_corners.
  static constexpr int kRowTiles = kWarpTileRows / ft::tc::kMmaM;  ///< 2 mma rows a warp
  static constexpr int kColWarps = key_col_warps(kWarps, Bc);      ///< 2: across queries or d
  static constexpr int kDqColWarps = dq_col_warps(kWarps, Br);     ///< dQ: across d
  static constexpr int kQTiles = Br / kColWarps / ft::tc::kMmaN;   ///< 8-query tiles of Sᵀ a warp
  static constexpr int kDTiles = D / kColWarps / ft::tc::kMmaN;    ///< 8-column tiles of dK, dV
  static constexpr int kDqTiles = D / kDqColWarps / ft::tc::kMmaN;  ///< 8-column tiles of dQ a warp
  static constexpr int kDSteps = D / ft::tc::kMmaK;    ///< k-steps over d (Sᵀ, dPᵀ)
  static constexpr int kQSteps = Br / ft::tc::kMmaK;   ///< over the queries (dV, dK)
  static constexpr int kKeySteps = Bc / ft::tc::kMmaK; ///< over the keys (dQ)
  static constexpr int kQBytes = ft::tc::tile_bytes<Tile>(Br);
  static constexpr int kKBytes = ft::tc::tile_bytes<Tile>(Bc);
  static constexpr int kPdsBytes = ft::tc::tile_bytes<PdsTile>(Bc);
  static constexpr int kRowStatBytes = Br * int(sizeof(float));
  static constexpr int kStageBytes = 2 * kQBytes + 2 * kRowStatBytes;  ///< Q, dO, L, D
  /// K, V, Pᵀ, dSᵀ, then two stages.
  static constexpr size_t kSmemBytes = size_t(2 * kKBytes + 2 * kPdsBytes + kStages * kStageBytes);

  static_assert(Bc / kWarpTileRows * kColWarps == kWarps && Br / kWarpTileRows * kDqColWarps == kWarps,
                "the warps tile every product exactly");
  static_assert(kQTiles % 2 == 0 && kDTiles % 2 == 0 && kDqTiles % 2 == 0,
                "B fragments are loaded in pairs (x4)");
  static_assert(kRowTiles * (2 * kQTiles + 2 * kDTiles) * ft::tc::kCElems <= 192,
                "Sᵀ, dPᵀ, dK, dV accumulators must leave registers for the rest (255 max)");
  static_assert(kSmemBytes <= ft::kMaxSmemPerBlock, "at most 227 KB of shared memory per block (sm_90)");
};

// ---- The staircase after warp_tiles, as one table of traits ------------------------------
//
// The six variants after warp_tiles run this file's kernel on warp_tiles' tiles, warps and
// bytes; each keeps every change before it and adds one, a flag of StepTraits:
//
//   step            turns on                      what changes
//   warp_tiles      (nothing)                     Pᵀ, dSᵀ via shared memory; every product
//                                                 in warp tiles 32 rows tall
//   hoisted         Lane = HoistedLaneOffsets,    each lane's part of the swizzle computed
//                   kRereadP = false              once: one XOR a load; P kept in registers
//   spread_atomics  kSpreadAtomics                dQ's product before dK's, its 16 atomics
//                                                 spread over dK's k-steps
//   pipelined_dk    kDkAhead                      dK's fragments loaded a k-step ahead,
//                                                 across the atomics' branches
//   late_copy       kLateCopy                     the next query tile's copies after Sᵀ's
//                                                 product, not right after the barrier
//   dq_pointer      kDqPointer                    dQ's atomics at immediate offsets from
//                                                 one opaque pointer a tile
//   split_tail      kSplitTail                    the last wave's key tiles cut into runs
//                                                 of query tiles (non-causal)
//
// What each step bought is measured against the step before it (tc_variants.csv; the
// README's step table); case_study.md beside it tells each step's why, with the profile that
// asked for it.

/// The steps in order: a variant has its own step's change and every earlier one's.
enum class Step : int { kWarpTiles, kHoisted, kSpreadAtomics, kPipelinedDk, kLateCopy, kDqPointer, kSplitTail };

template <class Element, int D_, Step kStep>
struct StepTraits : WarpTileTraits<Element, D_> {
  static constexpr bool from(Step s) { return int(kStep) >= int(s); }
  /// hoisted: where a lane's element of each fragment is (sm80/swizzle.hpp). Before it,
  /// Tile::offset of the warp's corner, the fragment's place and the lane's at every load: a
  /// row product, a division, a modulo and the XOR, for each of 144 ldmatrix a query tile,
  /// with too few registers left to keep the results (Nsight Compute: 1.59e9 instructions
  /// executed at B = 4, H = 16, N = 4096, d = 128, against FlashAttention-2's 1.07e9). From
  /// it, tc::HoistedLaneOffsets: two numbers per kind of load before the loop, then one LOP3
  /// with a constant a load (1.10e9 executed).
  template <class Layout>
  using Lane = std::conditional_t<from(Step::kHoisted), ft::tc::HoistedLaneOffsets<Layout>,
                                  ft::tc::LaneOffsets<Layout>>;
  /// dSᵀ needs the rounded P that dV uses: kept packed in registers (16 a lane at d = 128),
  /// or, at d = 64 where that is 32 registers and ptxas (sm_90) spills 68 bytes with them
  /// before hoisted, read back from the words this lane stored to Pt (32 more 4-byte loads).
  /// From hoisted, whose addresses take fewer registers, kept at d = 64 too (255, no spill).
  static constexpr bool kRereadP = !from(Step::kHoisted) && D_ == 64;
  /// spread_atomics: dQ's product before dK's (dV, dQ, dK read only what the barrier before
  /// them published, so the order computes the same), and its 16 float2 atomics a lane
  /// issued 16 / kQSteps before each of dK's k-steps instead of back to back before the next
  /// barrier, where the SM's global-memory queue throttled them (lg_throttle 0.31-0.42
  /// cycles an instruction against FlashAttention-2's 0.00-0.01).
  static constexpr bool kSpreadAtomics = from(Step::kSpreadAtomics);
  /// pipelined_dk: dK's product through warp_product_ahead, k-step ks + 1's fragments
  /// requested before the batch of atomics and ks's mma. Each batch sits behind a branch,
  /// and ptxas schedules within a basic block, so without this every k-step's first mma
  /// waited on its ldmatrix. Cost: a second set of dK's fragment registers (16 or 24).
  static constexpr bool kDkAhead = from(Step::kPipelinedDk);
  /// late_copy: the next query tile's cp.async after Sᵀ's product instead of right after
  /// the barrier at the top of the tile, where every warp at once spent ~120-130
  /// instructions on copies before its first mma (FlashAttention-2: 19).
  static constexpr bool kLateCopy = from(Step::kLateCopy);
  /// dq_pointer: the tile's dQ index through tc::opaque (sm80/opaque.cuh), so each atomic is
  /// `REDG [dq_tile + immediate]` rather than a 64-bit address rebuilt from a folded index
  /// (LOP3, IADD3, IMAD.X, LEA, LEA.HI.X before every REDG): the loop 7-9% shorter.
  static constexpr bool kDqPointer = from(Step::kDqPointer);
  /// split_tail: the key tiles of the grid's partial last wave (e.g. 68 of 2048 at d = 128
  /// on 132 SMs) cut into runs of query tiles, a block each (schedule/tail_split.hpp); a run
  /// adds its partial dK, dV into a float32 slot of the workspace, and store_shared_tiles
  /// rounds and stores the slots after the kernel. Non-causal only; causal is never cut.
  static constexpr bool kSplitTail = from(Step::kSplitTail);
};

/// acc[i][j] += A_i·B_j over kSteps k-steps for a warp tile of kM × kN mma tiles:
/// load_a(a, i, ks) fetches A's i-th 16-row fragment, load_b(b, j, ks) B's fragments j, j+1
/// (one ldmatrix.x4). Each A fragment is used kN times and each B pair kM times: the reuse
/// that a taller warp tile buys. before_step(ks), if given, runs before each k-step's loads.
struct NoStep {
  __device__ void operator()(int) const {}
};
template <class T, int kM, int kN, int kSteps, class LoadA, class LoadB, class BeforeStep = NoStep>
__device__ __forceinline__ void warp_product(FragC (&acc)[kM][kN], LoadA load_a, LoadB load_b,
                                             BeforeStep before_step = {}) {
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks) {
    before_step(ks);
    FragA a[kM];
#pragma unroll
    for (int i = 0; i < kM; ++i) load_a(a[i], i, ks);
#pragma unroll
    for (int j = 0; j < kN; j += 2) {
      FragB b[2];
      load_b(b, j, ks);
#pragma unroll
      for (int i = 0; i < kM; ++i) {
        ft::tc::mma_m16n8k16<T>(acc[i][j], a[i], b[0]);
        ft::tc::mma_m16n8k16<T>(acc[i][j + 1], a[i], b[1]);
      }
    }
  }
}

/// warp_product with the fragments of k-step ks + 1 requested before the mma of k-step ks:
/// two sets of fragment registers, one being multiplied while the other fills. between(ks)
/// runs after those requests and before k-step ks's mma, so that work placed there (the dQ
/// atomics of spread_atomics, each batch behind a branch) no longer stands between a
/// k-step's ldmatrix and its mma: the branch ends a basic block, and ptxas schedules within
/// one. The accumulators and the products are warp_product's.
template <class T, int kM, int kN, int kSteps, class LoadA, class LoadB, class Between>
__device__ __forceinline__ void warp_product_ahead(FragC (&acc)[kM][kN], LoadA load_a, LoadB load_b,
                                                   Between between) {
  FragA a[2][kM];
  FragB b[2][kN / 2][2];
  const auto load_step = [&](int buf, int ks) {
#pragma unroll
    for (int i = 0; i < kM; ++i) load_a(a[buf][i], i, ks);
#pragma unroll
    for (int j = 0; j < kN; j += 2) load_b(b[buf][j / 2], j, ks);
  };
  load_step(0, 0);
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks) {
    if (ks + 1 < kSteps) load_step((ks + 1) % 2, ks + 1);
    between(ks);
#pragma unroll
    for (int j = 0; j < kN; j += 2)
#pragma unroll
      for (int i = 0; i < kM; ++i) {
        ft::tc::mma_m16n8k16<T>(acc[i][j], a[ks % 2][i], b[ks % 2][j / 2][0]);
        ft::tc::mma_m16n8k16<T>(acc[i][j + 1], a[ks % 2][i], b[ks % 2][j / 2][1]);
      }
  }
}

/// One block's work on one key tile. kCut false: key tile blockIdx.x (Bc keys of head
/// blockIdx.x / num_kv_tiles), every query tile it sees (causal: from the diagonal's on),
/// dK and dV stored in the dtype. kCut true (split_tail's blocks past split.first): part r of
/// cut tile j, the query tiles [split.begin(r), split.begin(r + 1)), dK and dV added,
/// float32, into the tile's slot ([2][Bc][d]: dK, then dV). Each computes where its work is
/// where warp_tiles always did, so that the kernels before split_tail compile as they did
/// (the same SASS, function by function, bar a few); and the slot is found from blockIdx
/// after the loop, so that no pointer to it is held through the loop.
template <class Tr, bool kCut>
__device__ __forceinline__ void key_tile(const Params<typename Tr::T>& p, const TailSplit& split,
                                         const ft::ViewArgs& v) {
  using T = typename Tr::T;
  using Tile = typename Tr::Tile;
  using PdsTile = typename Tr::PdsTile;
  constexpr int D = Tr::D, Br = Tr::Br, Bc = Tr::Bc, kM = Tr::kRowTiles;

  extern __shared__ uint4 smem_raw[];
  T* Ks = reinterpret_cast<T*>(smem_raw);  // [Bc][D]
  T* Vs = Ks + Bc * Tile::kRowStride;      // [Bc][D]
  T* Pt = Vs + Bc * Tile::kRowStride;      // [Bc][Br]: Pᵀ
  T* dSt = Pt + Bc * PdsTile::kRowStride;  // [Bc][Br]: dSᵀ
  const QueryStages<T, Tile, Br> stage{reinterpret_cast<unsigned char*>(dSt + Bc * PdsTile::kRowStride)};
  static_assert(decltype(stage)::kBytes == Tr::kStageBytes, "one layout of a stage");

  const int lane = ft::tc::lane_id(), warp = threadIdx.x / ft::tc::kLanes;
  const int cut = kCut ? int(blockIdx.x - split.first) : 0;  // part cut % parts of cut tile cut / parts
  int k0;
  int64_t head;
  if constexpr (kCut) {
    const int64_t tile = split.first + cut / split.parts;
    k0 = int(tile % p.num_kv_tiles) * Bc;
    head = tile / p.num_kv_tiles;
  } else {
    k0 = int(blockIdx.x % p.num_kv_tiles) * Bc;
    head = blockIdx.x / p.num_kv_tiles;
  }
  const int N = p.N;
  const int64_t head_rows = head * N;  // first row of this head in [B,H,N]: lse, D, dq_acc
  // This head's rows: heads back to back (the layout contract), or where a view's strides
  // put them (strides.hpp; the contiguous lines stay as they were measured).
  constexpr bool kViews = Tr::kViews;
  const T* Q = p.Q + head_rows * D;
  const T* dO = p.dO + head_rows * D;
  const T* K = p.K + head_rows * D;
  const T* V = p.V + head_rows * D;
  if constexpr (kViews) {
    Q = p.Q + ft::head_start(v.strides.Q, head, v.heads);
    dO = p.dO + ft::head_start(v.strides.dO, head, v.heads);
    K = p.K + ft::head_start(v.strides.K, head, v.heads);
    V = p.V + ft::head_start(v.strides.V, head, v.heads);
  }
  // This warp's place in each product (the table in the file comment).
  const WarpTileCorners at0 = warp_tile_corners(warp, Tr::kWarps, Br, Bc, D);
  const int key0 = at0.key0, qcol0 = at0.query0, dcol0 = at0.dcol0;
  const int dq_row0 = at0.dq_query0, dq_col0 = at0.dq_col0;
  // This lane's element of each fragment of those tiles: fragment (dr, dc) of a warp tile
  // is at tile + lanes(dr, dc). (row, col) of the corners are as the tiles are stored.
  using TileLane = typename Tr::template Lane<Tile>;
  using PdsLane = typename Tr::template Lane<PdsTile>;
  const TileLane kv_a({key0, 0}, ft::tc::ldmatrix_src_a(lane));              // Sᵀ, dPᵀ: A = K, V
  const TileLane qdo_b({qcol0, 0}, ft::tc::ldmatrix_src_b_x4(lane));         // Sᵀ, dPᵀ: B = Qᵀ, dOᵀ
  const PdsLane pds_c({key0, qcol0}, ft::tc::mma_c_coord(lane, 0));          // Pᵀ, dSᵀ stored
  const PdsLane pds_a({key0, 0}, ft::tc::ldmatrix_src_a(lane));              // dV, dK: A = Pᵀ, dSᵀ
  const TileLane qdo_bt({0, dcol0}, ft::tc::ldmatrix_src_b_trans_x4(lane));  // dV, dK: B = dO, Q
  const PdsLane ds_at({0, dq_row0}, ft::tc::ldmatrix_src_a_trans(lane));     // dQ: A = dS
  const TileLane k_bt({0, dq_col0}, ft::tc::ldmatrix_src_b_trans_x4(lane));  // dQ: B = K

  // The lane's first element of dQ's accumulator in query tile 0: (row, col) of its first pair.
  const RowCol dq_c = ft::tc::mma_c_coord(lane, 0) + RowCol{dq_row0, dq_col0};
  const int64_t dq_lane_at = (head_rows + dq_c.row) * D + dq_c.col;  // its index (kDqPointer)
  float* const dq_lane = p.dq_acc + dq_lane_at;

  const QueryTileLoader<Tr::kThreads, T, Tile, Br, kViews> load_async{};
  auto load_query_tile = [&](int i, int st) {  // Q, dO, L, D of query tile i, by cp.async
    load_async(stage, st, Q, dO, p.lse, p.Drow, head_rows, i * Br, N,
               ft::row_stride<kViews>(v.strides.Q), ft::row_stride<kViews>(v.strides.dO));
  };

  const int num_q_tiles = (N + Br - 1) / Br;
  const int i_begin = kCut ? split.begin(cut % split.parts) : (p.causal ? k0 / Br : 0);
  const int i_end = kCut ? split.begin(cut % split.parts + 1) : num_q_tiles;
  load_query_tile(i_begin, 0);
  ft::tc::copy_tile_sync<Tile, Bc, Tr::kThreads>(Ks, K, k0, N, ft::row_stride<kViews>(v.strides.K));
  ft::tc::copy_tile_sync<Tile, Bc, Tr::kThreads>(Vs, V, k0, N, ft::row_stride<kViews>(v.strides.V));

  FragC dk[kM][Tr::kDTiles] = {}, dv[kM][Tr::kDTiles] = {};  // 32 keys × d/2, float32

  for (int i = i_begin; i < i_end; ++i) {
    const int q0 = i * Br, st = (i - i_begin) % 2;
    ft::tc::cp_async_wait<0>();
    __syncthreads();  // tile i is in; every warp is done with tile i−1, its Pᵀ and dSᵀ
    if (!Tr::kLateCopy && i + 1 < i_end) load_query_tile(i + 1, 1 - st);
    const T* Qs = stage.q(st);
    const T* dOs = stage.dO(st);
    const float* Ls = stage.l(st);
    const float* Ds = stage.d(st);

    // Sᵀ = K·Qᵀ for this warp's 32 keys × Br/2 queries (A: K's rows; B: Q's rows).
    FragC sc[kM][Tr::kQTiles] = {};
    warp_product<T, kM, Tr::kQTiles, Tr::kDSteps>(
        sc, [&](FragA& a, int m, int ks) { ft::tc::load_a(a, Ks + kv_a(16 * m, 16 * ks)); },
        [&](FragB (&b)[2], int n, int ks) { ft::tc::load_b_x4(b, Qs + qdo_b(8 * n, 16 * ks)); });
    // late_copy: the next tile's copies here, while Sᵀ's mma finish (the exponentials below
    // wait for them), rather than after the barrier, where every warp is at the same point
    // and nothing else keeps the tensor cores busy. Stage 1 − st is free from the barrier on.
    if (Tr::kLateCopy && i + 1 < i_end) load_query_tile(i + 1, 1 - st);

    // Pᵀ = exp2(Sᵀ·scale·log2e − L·log2e), 0 where masked. The exponents first (L·log2e of
    // this lane's queries read once, before the stores to Pt below, after each of which the
    // compiler would otherwise reload Ls); then, only in tiles that cross N or the diagonal
    // (one branch a tile), masked exponents become −∞, so that the exponentials are one
    // straight run of code: exp2(−∞) = 0, the P = 0 of flash_backward_tc.
    const int lane_q = qcol0 + ft::tc::mma_c_coord(lane, 0).col;  // the lane's first query
#pragma unroll
    for (int n = 0; n < Tr::kQTiles; ++n) {
      const float2 l = *reinterpret_cast<const float2*>(Ls + lane_q + 8 * n);
#pragma unroll
      for (int m = 0; m < kM; ++m)
#pragma unroll
        for (int i = 0; i < ft::tc::kCElems; ++i)
          sc[m][n].c[i] = fmaf(sc[m][n].c[i], p.scale_log2, -(i % 2 ? l.y : l.x) * ft::kLog2e);
    }
    if (k0 + Bc > N || q0 + Br > N || (p.causal && k0 + Bc - 1 > q0)) {
#pragma unroll
      for (int m = 0; m < kM; ++m)
#pragma unroll
        for (int n = 0; n < Tr::kQTiles; ++n)
#pragma unroll
          for (int i = 0; i < ft::tc::kCElems; ++i) {
            const RowCol at = ft::tc::mma_c_coord(lane, i) + RowCol{k0 + key0 + 16 * m, q0 + qcol0 + 8 * n};
            if (at.row >= N || at.col >= N || (p.causal && at.row > at.col)) sc[m][n].c[i] = -INFINITY;
          }
    }
    // Packed in pairs (two queries of one key), stored to Pt, and kept unless kRereadP.
    uint32_t pp[kM][Tr::kQTiles][ft::tc::kMBlocks];
#pragma unroll
    for (int m = 0; m < kM; ++m)
#pragma unroll
      for (int n = 0; n < Tr::kQTiles; ++n)
#pragma unroll
        for (int h = 0; h < ft::tc::kMBlocks; ++h) {
          pp[m][n][h] = ft::tc::pack2<T>(ft::exp2_ftz(sc[m][n].c[2 * h]), ft::exp2_ftz(sc[m][n].c[2 * h + 1]));
          *reinterpret_cast<uint32_t*>(Pt + pds_c(16 * m + 8 * h, 8 * n)) = pp[m][n][h];
        }

    // dPᵀ = V·dOᵀ, then dSᵀ = scale·Pᵀ∘(dPᵀ − D) with the rounded P that dV will use (read
    // back, with kRereadP, from the very words this lane stored: no barrier needed).
    FragC dpt[kM][Tr::kQTiles] = {};
    warp_product<T, kM, Tr::kQTiles, Tr::kDSteps>(
        dpt, [&](FragA& a, int m, int ks) { ft::tc::load_a(a, Vs + kv_a(16 * m, 16 * ks)); },
        [&](FragB (&b)[2], int n, int ks) { ft::tc::load_b_x4(b, dOs + qdo_b(8 * n, 16 * ks)); });
    float2 dq_d[Tr::kQTiles];  // D of the lane's queries, once (as L above)
#pragma unroll
    for (int n = 0; n < Tr::kQTiles; ++n) dq_d[n] = *reinterpret_cast<const float2*>(Ds + lane_q + 8 * n);
#pragma unroll
    for (int m = 0; m < kM; ++m)
#pragma unroll
      for (int n = 0; n < Tr::kQTiles; ++n)
#pragma unroll
        for (int h = 0; h < ft::tc::kMBlocks; ++h) {
          const int stored = pds_c(16 * m + 8 * h, 8 * n);  // this lane's pair, as stored
          const float2 prob = ft::tc::unpack2<T>(
              Tr::kRereadP ? *reinterpret_cast<const uint32_t*>(Pt + stored) : pp[m][n][h]);
          *reinterpret_cast<uint32_t*>(dSt + stored) = ft::tc::pack2<T>(
              p.scale * prob.x * (dpt[m][n].c[2 * h] - dq_d[n].x),
              p.scale * prob.y * (dpt[m][n].c[2 * h + 1] - dq_d[n].y));
        }
    __syncthreads();  // all of Pᵀ and dSᵀ is stored

    // dV += Pᵀ·dO and dK += dSᵀ·Q for 32 keys × d/2: A as stored, B transposed from rows;
    // dK's before_step(ks) runs before each of its k-steps (spread_atomics' dQ atomics).
    warp_product<T, kM, Tr::kDTiles, Tr::kQSteps>(
        dv, [&](FragA& a, int m, int ks) { ft::tc::load_a(a, Pt + pds_a(16 * m, 16 * ks)); },
        [&](FragB (&b)[2], int n, int ks) { ft::tc::load_b_trans_x4(b, dOs + qdo_bt(16 * ks, 8 * n)); });
    const auto dk_product = [&](auto before_step) {
      const auto load_a = [&](FragA& a, int m, int ks) { ft::tc::load_a(a, dSt + pds_a(16 * m, 16 * ks)); };
      const auto load_b = [&](FragB (&b)[2], int n, int ks) {
        ft::tc::load_b_trans_x4(b, Qs + qdo_bt(16 * ks, 8 * n));
      };
      if constexpr (Tr::kDkAhead)
        warp_product_ahead<T, kM, Tr::kDTiles, Tr::kQSteps>(dk, load_a, load_b, before_step);
      else
        warp_product<T, kM, Tr::kDTiles, Tr::kQSteps>(dk, load_a, load_b, before_step);
    };
    if constexpr (!Tr::kSpreadAtomics) dk_product(NoStep{});

    // dQ's share of these keys, dS·K for 32 queries × this warp's columns: dS read
    // transposed from the [key][query] tile, K transposed from its rows; float2 atomics.
    FragC dq[kM][Tr::kDqTiles] = {};
    warp_product<T, kM, Tr::kDqTiles, Tr::kKeySteps>(
        dq, [&](FragA& a, int m, int ks) { ft::tc::load_a_trans(a, dSt + ds_at(16 * ks, 16 * m)); },
        [&](FragB (&b)[2], int n, int ks) { ft::tc::load_b_trans_x4(b, Ks + k_bt(16 * ks, 8 * n)); });
    // From the lane's first element (dq_lane), each pair is a constant offset away; only the
    // last query tile can reach past N.
    float* const dq_tile = Tr::kDqPointer ? p.dq_acc + ft::tc::opaque(dq_lane_at + int64_t(q0) * D)
                                          : dq_lane + int64_t(q0) * D;
    const bool whole = q0 + Br <= N;
    if constexpr (Tr::kSpreadAtomics) {
      // The lane's k-th float2 atomic of this tile (k over m, n, h as in the loops below),
      // kPerStep of them before each of dK's k-steps (kSpreadAtomics).
      const auto dq_atomic = [&](int k) {
        const int m = k / (Tr::kDqTiles * ft::tc::kMBlocks), n = k / ft::tc::kMBlocks % Tr::kDqTiles;
        const int h = k % ft::tc::kMBlocks;
        const RowCol step = ft::tc::c_block(h) + RowCol{16 * m, 8 * n};  // from the lane's first pair
        if (whole || q0 + dq_c.row + step.row < N)
          atomic_add2(dq_tile + step.row * D + step.col, dq[m][n].c[2 * h], dq[m][n].c[2 * h + 1]);
      };
      constexpr int kDqAtomics = kM * Tr::kDqTiles * ft::tc::kMBlocks;  // 16 a lane at either d
      static_assert(kDqAtomics % Tr::kQSteps == 0, "the atomics spread evenly over dK's k-steps");
      constexpr int kPerStep = kDqAtomics / Tr::kQSteps;  // 4 at d = 128, 2 at d = 64
      dk_product([&](int ks) {
#pragma unroll
        for (int k = 0; k < kPerStep; ++k) dq_atomic(ks * kPerStep + k);
      });
    } else {
      // The same 16 atomics back to back. Written out rather than as dq_atomic(0..15): with
      // the lambda, ptxas compiles hoisted's loop 134 instructions longer (d = 128, sm_90)
      // and gives it a stack frame, and these loops are the SASS warp_tiles and hoisted
      // were measured with.
#pragma unroll
      for (int m = 0; m < kM; ++m)
#pragma unroll
        for (int n = 0; n < Tr::kDqTiles; ++n)
#pragma unroll
          for (int h = 0; h < ft::tc::kMBlocks; ++h) {
            const RowCol step = ft::tc::c_block(h) + RowCol{16 * m, 8 * n};  // from the lane's first pair
            if (whole || q0 + dq_c.row + step.row < N)
              atomic_add2(dq_tile + step.row * D + step.col, dq[m][n].c[2 * h], dq[m][n].c[2 * h + 1]);
          }
    }
  }

  // dK, dV of this warp's 32 keys × d/2 columns, each element written once.
#pragma unroll
  for (int m = 0; m < kM; ++m)
#pragma unroll
    for (int n = 0; n < Tr::kDTiles; ++n)
#pragma unroll
      for (int h = 0; h < ft::tc::kMBlocks; ++h) {
        const RowCol at = ft::tc::mma_c_coord(lane, 2 * h) + RowCol{key0 + 16 * m, dcol0 + 8 * n};
        if (k0 + at.row >= N) continue;
        if (kCut) {
          const int j = int(blockIdx.x - split.first) / split.parts;  // the cut tile
          float* const dk_slot = split.slots + j * split.slot_floats;  // then dV's, Bc·d further
          atomic_add2(dk_slot + at.row * D + at.col, dk[m][n].c[2 * h], dk[m][n].c[2 * h + 1]);
          atomic_add2(dk_slot + (Bc + at.row) * D + at.col, dv[m][n].c[2 * h], dv[m][n].c[2 * h + 1]);
        } else {
          if constexpr (kViews) {
            const int64_t key = k0 + at.row;
            T* const dK = p.dK + ft::head_start(v.strides.dK, head, v.heads) + key * v.strides.dK.row;
            T* const dV = p.dV + ft::head_start(v.strides.dV, head, v.heads) + key * v.strides.dV.row;
            *reinterpret_cast<uint32_t*>(dK + at.col) = ft::tc::pack2<T>(dk[m][n].c[2 * h], dk[m][n].c[2 * h + 1]);
            *reinterpret_cast<uint32_t*>(dV + at.col) = ft::tc::pack2<T>(dv[m][n].c[2 * h], dv[m][n].c[2 * h + 1]);
          } else {
            const int64_t at_row = (head_rows + k0 + at.row) * D + at.col;
            *reinterpret_cast<uint32_t*>(p.dK + at_row) = ft::tc::pack2<T>(dk[m][n].c[2 * h], dk[m][n].c[2 * h + 1]);
            *reinterpret_cast<uint32_t*>(p.dV + at_row) = ft::tc::pack2<T>(dv[m][n].c[2 * h], dv[m][n].c[2 * h + 1]);
          }
        }
      }
}

/// The key-block kernel of warp_tiles and the variants after it: block b works on key tile
/// b, all the query tiles it sees (causal: from the diagonal's on); with kSplitTail, the
/// blocks past split.first each on one part of a cut tile (tail_split.hpp).
template <class Tr>
__global__ void __launch_bounds__(Tr::kThreads) flash_backward_warp_tiles(const Params<typename Tr::T> p,
                                                                          const TailSplit split,
                                                                          const ft::ViewArgs v) {
  if (!Tr::kSplitTail || blockIdx.x < split.first)
    key_tile<Tr, false>(p, split, v);
  else
    key_tile<Tr, true>(p, split, v);
}

/// split_tail's second kernel. Cut tile j's dK and dV: its slot's float32 sums rounded to the dtype, rows past N left
/// alone. One block a cut tile. kViews: dK and dV where their strides say.
template <class T, int D, int Bc, bool kViews>
__global__ void store_shared_tiles(const Params<T> p, const TailSplit split,
                                   const ft::ViewArgs views) {
  const int64_t tile = split.first + blockIdx.x;
  const int64_t head = tile / p.num_kv_tiles;
  const int k0 = int(tile % p.num_kv_tiles) * Bc;
  const float* dk = split.slots + blockIdx.x * split.slot_floats;
  const float* dv = dk + Bc * D;
  for (int e = 2 * threadIdx.x; e < Bc * D; e += 2 * blockDim.x) {  // a pair a thread: 8-byte loads
    const int row = e / D, col = e % D;
    if (k0 + row >= p.N) break;  // the rows are in order: the rest are past N too
    int64_t at_k = (head * p.N + k0 + row) * D + col, at_v = at_k;  // contiguous
    if constexpr (kViews) {
      at_k = ft::head_start(views.strides.dK, head, views.heads) + (k0 + row) * views.strides.dK.row + col;
      at_v = ft::head_start(views.strides.dV, head, views.heads) + (k0 + row) * views.strides.dV.row + col;
    }
    const float2 k = *reinterpret_cast<const float2*>(dk + e), v = *reinterpret_cast<const float2*>(dv + e);
    p.dK[at_k] = from_float<T>(k.x);
    p.dK[at_k + 1] = from_float<T>(k.y);
    p.dV[at_v] = from_float<T>(v.x);
    p.dV[at_v + 1] = from_float<T>(v.y);
  }
}

}  // namespace ch08
