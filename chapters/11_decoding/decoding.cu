// Chapter 11's decode implementations: a block a query head (one_block), the keys split
// across blocks and merged by their lse (split_kv), a block a key/value head for all the
// query heads that read it (grouped), a tile's V rows loaded together (batched_v), a key/
// value head's rows on the tensor cores (tensor_cores), and on Hopper's wgmma (wgmma); the
// fastest of the last two over a paged cache
// (decode_paged); their launch, ledger, registration, and the program's extra rows (the
// streaming-read ceiling, the paged cache's page sizes).
#include "11_decoding/decoding.hpp"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <utility>

#include "11_decoding/decode_kernels.cuh"
#include "11_decoding/decode_mma.cuh"
#include "11_decoding/decode_wgmma.cuh"
#include "core/check.cuh"
#include "device/buffer.cuh"
#include "device/dispatch.cuh"
#include "device/fill.cuh"
#include "device/launch.cuh"
#include "device/timer.cuh"
#include "harness/registry.hpp"
#include "harness/traffic.hpp"

namespace ch11 {

/// The ledger's guess of the blocks a SM holds at once, for a prediction without a GPU: at
/// d = 128 decode_split takes 88–128 registers a thread with one to four rows a block (4–5
/// blocks of 128 threads) and up to 212 with sixteen (2 blocks; ptxas, sm_90), so the guess
/// overstates the splits of wide groups. A launch asks the runtime instead (blocks_per_sm).
constexpr int kLedgerBlocksPerSm = 4;

int choose_splits(int64_t blocks, int len_kv, int sms, int blocks_per_sm, int min_split_keys) {
  if (blocks <= 0 || len_kv <= 0 || sms <= 0 || blocks_per_sm <= 0 || min_split_keys <= 0) return 1;
  // Rounded down: one block more than the GPU holds at once waits for a second wave and
  // doubles the time (17 splits of 32 heads, 544 blocks, on 528 places: 0.58 of the read).
  const int64_t want = int64_t(blocks_per_sm) * sms / blocks;
  const int64_t most = std::max(1, (len_kv + min_split_keys - 1) / min_split_keys);
  return int(std::max<int64_t>(1, std::min<int64_t>({want, most, kMaxSplits})));
}

/// The environment variable that sets decode_mma's row tiles a block (1 or 2) for the
/// measurement of two tiles against one (gpu_run's decode step, --decode-ab
/// FT_CH11_ROW_TILES=1). Unset or empty in every other use.
constexpr const char* kRowTilesEnv = "FT_CH11_ROW_TILES";

/// Two row tiles pay only where the one-tile grid fills the GPU with at most this many
/// splits, each of at least kLeastKeysForTwoTiles keys (32 block tiles).
constexpr int kMostSplitsForTwoTiles = 8;
constexpr int kLeastKeysForTwoTiles = 32 * kTileKeys;

/// The environment variable that chooses how the merge is launched: as a programmatic
/// dependent of the decode kernel (decode_kernels.cuh's let_merge_launch and
/// wait_for_decode), the default on sm_90, or plainly behind it with FT_CH11_PDL=0, for the
/// measurement of one against the other (gpu_run's decode step, --decode-ab FT_CH11_PDL=0).
/// The early launch saved 0.6-1.2 us a step at B = 1 (ch11_pdl_ab.csv) and ran clean under
/// compute-sanitizer.
constexpr const char* kPdlEnv = "FT_CH11_PDL";

bool merge_launches_early() {
  const char* asked = std::getenv(kPdlEnv);
  const bool plain = asked && *asked && std::atoi(asked) == 0;
  if (plain || ft::device_sm() < 90) return false;
  // The GPU is not enough: the merge's code must have been compiled for sm_90 or later (its
  // PTX version), or its wait was compiled out and it would read splits still being written
  // (a build for sm_80 alone, run on an H100). Every instance comes from this one compile.
  static const int ptx_version = [] {
    cudaFuncAttributes attributes{};
    CUDA_CHECK(cudaFuncGetAttributes(&attributes, decode_merge<__nv_bfloat16, 128, 1>));
    return attributes.ptxVersion;
  }();
  return ptx_version >= 90;
}

int mma_row_tiles(int64_t rows, int len_kv, int splits_one) {
  if (const char* forced = std::getenv(kRowTilesEnv); forced && *forced)
    return std::clamp(std::atoi(forced), 1, kMaxRowTiles);
  const int64_t keys_a_split = (int64_t(len_kv) + splits_one - 1) / std::max(1, splits_one);
  const bool pays = splits_one <= kMostSplitsForTwoTiles && keys_a_split >= kLeastKeysForTwoTiles;
  return rows > kMmaRows && pays ? kMaxRowTiles : 1;
}

/// The environment variable that overrides uses_wgmma, and so what `fastest` and the paged
/// cache run (the tests force both ways): 1 runs decode_wgmma wherever the GPU can, 0 never.
/// Unset or empty in every other use.
constexpr const char* kWgmmaEnv = "FT_CH11_WGMMA";

/// Step 6 from this many rows a key/value head (its 64 rows a block then partly zero
/// queries, computed and dropped). Measured beside step 5 on the chapter's grid (H100, d = 128,
/// ch11_wgmma_grid.csv): 0.98-3.20x with 128 rows, 1.00-1.24x with 32, 0.99-1.17x with 16
/// (ahead at short caches, level at long ones).
constexpr int64_t kWgmmaMinRows = 16;

/// With fewer rows step 6 pays where the cache is short: forced against step 5 (H100, d = 128,
/// bf16, ch11_wgmma_four_rows_ab.csv, ch11_wgmma_rows_ab.csv; K and V together) it ran 1.00-1.24x
/// with 4 rows and 1.08-1.26x with 8 on caches of 2 to 32 MB, where a decode step lasts a few
/// launches' latency and step 6's one-tile splits and merge in a cluster shorten it; 0.98-1.00x
/// with 4 or 8 rows from 64 MB to 4 GB, and 0.98x with 1 or 2 rows on caches of 8-64 MB.
constexpr int64_t kWgmmaMinRowsShortCache = 4;
constexpr int64_t kShortCacheBytes = int64_t(32) << 20;

bool wgmma_pays(int64_t rows, int64_t cache_bytes) {
  return rows >= kWgmmaMinRows || (rows >= kWgmmaMinRowsShortCache && cache_bytes <= kShortCacheBytes);
}

/// The bytes of K and V that wgmma_pays weighs: the whole cache, as a decode step reads it (a
/// paged batch as if every sequence were its longest, N_k). The limit is in bytes, measured at
/// d = 128: at d = 64 the same bytes hold twice the keys, unmeasured.
static int64_t kv_cache_bytes(const ft::Problem& p) { return 2 * int64_t(p.kv_bytes()); }

/// The environment variable that sets decode_wgmma's warpgroups a block (1 or 2) for the
/// measurement of one against the other (the program with --variant wgmma:
/// ch11_wgmma_warpgroups.csv) and the tests. Unset or empty in every other use.
constexpr const char* kWarpgroupsEnv = "FT_CH11_WARPGROUPS";

/// Step 6 splits the keys down to one block tile a split, where steps 2-5 stop at
/// kMinSplitKeys (256): at B = 1 with 32 heads on one, 1,024 to 4,096 keys, the tile's
/// splits ran 1.08-1.17x faster and elsewhere 1.00-1.06x (H100, ch11_split_minimum_ab.csv),
/// where step 5 at B = 16 had run 1.39x slower with them (H200, ch11_short_splits.csv).
constexpr int kMinWgmmaSplitKeys = kTileKeys;

/// Two warpgroups pay where each split of their grid reads at least this many keys (8 block
/// tiles): below it, presumably (not profiled), a block's start (Q and two tiles in flight)
/// is a large share of its time, and one warpgroup's grid computes a split's two halves of
/// the rows on two SMs at once. Measured at 128 rows (H100,
/// ch11_wgmma_warpgroups_hybrid.csv): wgmma_warpgroups in decoding.hpp. One count for both
/// caches, so that the paged cache runs the contiguous one's kernel and grid (the program
/// checks their outputs bit for bit).
constexpr int kLeastKeysForTwoWarpgroups = 8 * kTileKeys;

int keys_a_split(int len_kv, int splits) {
  const int keys = (len_kv + splits - 1) / std::max(1, splits);
  return (keys + kTileKeys - 1) / kTileKeys * kTileKeys;  // whole block tiles
}

/// The environment variable that keeps the empty splits choose_splits' count can leave
/// (splits_with_keys), for their measurement; unset or empty: dropped.
constexpr const char* kEmptySplitsEnv = "FT_CH11_EMPTY_SPLITS";

int splits_with_keys(int len_kv, int splits) {
  if (const char* kept = std::getenv(kEmptySplitsEnv); kept && *kept && std::atoi(kept) != 0) return splits;
  const int keys = keys_a_split(len_kv, splits);
  return std::max(1, std::min(splits, (len_kv + keys - 1) / std::max(1, keys)));
}

int wgmma_warpgroups(int64_t rows, int keys_a_split_two) {
  if (const char* forced = std::getenv(kWarpgroupsEnv); forced && *forced)
    return std::clamp(std::atoi(forced), 1, kMaxWarpgroups);
  return rows > kWgmmaRows && keys_a_split_two >= kLeastKeysForTwoWarpgroups ? kMaxWarpgroups : 1;
}

/// The environment variable that overrides merges_in_cluster for the measurement of the
/// cluster's merge against decode_merge and the tests: 0 never, 1 wherever the splits are
/// few enough (2 to kMaxClusterSplits) and a cluster fits the GPU. Unset or empty in every
/// other use.
constexpr const char* kClusterEnv = "FT_CH11_CLUSTER";

/// The largest partial result a block may keep for the cluster's merge: the bytes every
/// block then reads from the others' shared memory. Measured on an H100 at 1,024 keys
/// (ch11_cluster_merge_rule_ab.csv): parts of 8 and 16 KB merged 1.02-1.11x faster in the
/// cluster than through the workspace, parts of 32 KB 0.95-0.97x (presumably the reads
/// between SMs; not profiled).
constexpr size_t kMaxClusterPartBytes = 16 << 10;

bool merges_in_cluster(int splits, int64_t clusters, int active, size_t part_bytes) {
  if (splits < 2 || splits > kMaxClusterSplits || active < 1) return false;
  if (const char* forced = std::getenv(kClusterEnv); forced && *forced) return std::atoi(forced) != 0;
  return clusters <= active && part_bytes <= kMaxClusterPartBytes;
}

/// The environment variable that forces the grid's merge on (1: wherever the grid runs at
/// once) or off (0), for its measurement against decode_merge and for the tests; unset or
/// empty: the rule below.
constexpr const char* kGridMergeEnv = "FT_CH11_GRID_MERGE";

/// The rule, no more query rows than blocks, as measured on an H100 with 32 query heads,
/// d = 128, bf16 (ch11_grid_merge_ab_rows*.csv): where no block merges more than one row
/// (B = 1 from 8,192 keys) a step with the grid's merge ran 1.00-1.06x one with decode_merge;
/// where blocks merge rows one after another, 0.61-0.98x (B = 16 with 32 heads on one: 512 or
/// 2,048 rows on at most 132 blocks; B = 1 at 1,024 keys with four rows: 128 rows on 16).
bool merges_in_grid(int splits, int64_t rows, int64_t blocks, int64_t resident) {
  if (splits < 2 || blocks > resident) return false;  // nothing to merge; a grid that would not run at once
  if (const char* forced = std::getenv(kGridMergeEnv); forced && *forced) return std::atoi(forced) != 0;
  return rows <= blocks;
}

/// The environment variable that forces the grid merge's slices a row (1, 2 or 4), for their
/// measurement against whole rows and for the tests; unset or empty: grid_merge_slices' rule.
constexpr const char* kGridMergeSlicesEnv = "FT_CH11_GRID_MERGE_SLICES";

int grid_merge_slices(int splits, int64_t rows, int64_t blocks, int block_threads, int head_dim) {
  if (const char* forced = std::getenv(kGridMergeSlicesEnv); forced && *forced) {
    const int slices = std::atoi(forced);
    if (slices != 1 && slices != 2 && slices != 4)
      throw ft::Unsupported(std::string(kGridMergeSlicesEnv) + "=" + forced + ": the grid's merge cuts a row into "
                            "1, 2 or 4 slices of its columns");
    return slices;
  }
  const int slots = std::max(1, block_threads / (head_dim / 4));  // a whole row's slots (merge_block_rows)
  for (int slices = 1; slices < 4; slices *= 2)
    if (splits <= slots * slices * kMergeBatch || rows * slices * 2 > blocks) return slices;
  return 4;
}

bool uses_wgmma(const ft::Problem& p) {
  if (ft::device_sm() != 90) return false;  // sm_90a machine code runs on Hopper alone
  if (const char* forced = std::getenv(kWgmmaEnv); forced && *forced) return std::atoi(forced) != 0;
  // The group's rows, as the grouped variants pack them, and the cache they read.
  return wgmma_pays(int64_t(p.group()) * p.len_q, kv_cache_bytes(p));
}

int merge_rows(int splits, int head_dim) {
  int rows = kMaxMergeRows;
  while (rows > 1 && (kMergeThreads / rows / (head_dim / 4)) * kMergeBatch < splits) rows /= 2;
  return rows;
}

namespace {

using Compiled = ft::Instances<ft::DTypes<ft::DType::BFloat16, ft::DType::Float16>, ft::HeadDims<64, 128>>;

// How a variant lays its blocks out (template parameters below):
//   kGrouped: a block a key/value head (all its query heads), or a block a query head;
//   kSplit:   the keys split across blocks (choose_splits), or one block the whole range.

int64_t rows_a_head(const ft::Problem& p, bool grouped) { return int64_t(grouped ? p.group() : 1) * p.len_q; }

/// The most splits a launch may take for these keys, whatever the GPU: the workspace is sized
/// before any GPU is asked. One block tile (kTileKeys) a split at the least: step 6's own
/// minimum, below steps 2-5's kMinSplitKeys, so that a forced count (FT_CH11_SPLITS) can
/// measure every split count at short caches.
int max_splits(int len_kv) { return std::min(kMaxSplits, std::max(1, (len_kv + kTileKeys - 1) / kTileKeys)); }

/// The environment variable that overrides choose_splits for the measurement of the
/// heuristic against a sweep (gpu_run's decode step): a split count, clamped to what the
/// workspace holds (max_splits). Unset or empty in every other use.
constexpr const char* kSplitsEnv = "FT_CH11_SPLITS";

/// The split count a launch is asked for: 1 without splitting, FT_CH11_SPLITS's when set,
/// else kAutoSplits (launch chooses, knowing its kernel's occupancy).
constexpr int kAutoSplits = 0;
int splits_of(const ft::Problem& p, bool split) {
  if (!split) return 1;
  if (const char* forced = std::getenv(kSplitsEnv); forced && *forced)
    return std::clamp(std::atoi(forced), 1, max_splits(p.len_kv));
  return kAutoSplits;
}

/// Blocks of `kernel` (`threads` each, `smem` bytes of dynamic shared memory besides its
/// static) that one SM holds at once: its registers and shared memory decide. Asked of the
/// runtime once a kernel.
int blocks_per_sm(const void* kernel, size_t smem = 0, int threads = kThreads) {
  static std::mutex lock;
  static std::map<std::pair<const void*, size_t>, int> known;
  const std::lock_guard<std::mutex> hold(lock);
  auto [at, fresh] = known.try_emplace({kernel, smem}, 0);
  if (fresh) CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&at->second, kernel, threads, smem));
  return at->second;
}

/// What every decode refuses, contiguous or paged.
void check_decode(const ft::Problem& p) {
  if (p.len_q > kMaxQueryRows)
    throw ft::Unsupported("chapter 11 decodes at most " + std::to_string(kMaxQueryRows) +
                          " query rows a sequence (N_q = " + std::to_string(p.len_q) +
                          "): prefill a longer prompt with chapter 07's or 09's forward");
  if (!(p.softmax_scale() > 0.f)) throw ft::Unsupported("chapter 11: the softmax scale must be positive");
}

/// The split workspace's bytes (each split's O and lse), after check_decode: the library's
/// workspace query refuses what a launch would, so that a caller asking first (flashtut's
/// Python package, before it allocates) hears why.
template <bool kGrouped, bool kSplit>
size_t workspace(const ft::Problem& p) {
  check_decode(p);
  const int splits = kSplit ? max_splits(p.len_kv) : 1;
  if (splits == 1) return 0;
  return size_t(splits) * size_t(p.rows()) * (size_t(p.head_dim) + 1) * sizeof(float);
}

/// Refuses, before any launch, more splits than the workspace holds for these keys
/// (max_splits, at most kMaxSplits).
void check_splits(const ft::Problem& p, int splits) {
  if (splits < 1 || splits > max_splits(p.len_kv))
    throw ft::Unsupported("chapter 11: " + std::to_string(splits) + " splits of " + std::to_string(p.len_kv) +
                          " keys; the workspace and the merge take 1 to " + std::to_string(max_splits(p.len_kv)));
}

/// The merge's instance for blocks of `rows` query rows (1, 2, 4 or 8).
template <class T, int D>
void (*merge_for(int rows))(const float*, const float*, T*, float*, int64_t, int) {
  switch (rows) {
    case 8: return decode_merge<T, D, 8>;
    case 4: return decode_merge<T, D, 4>;
    case 2: return decode_merge<T, D, 2>;
    default: return decode_merge<T, D, 1>;
  }
}

/// With splits, the merge of every query row's splits (decode_merge): behind the decode
/// kernel in the stream, or (merge_launches_early) launched while it runs.
template <class T, int D>
void merge_splits(const ft::Problem& p, const Params<T>& params, cudaStream_t stream) {
  if (params.splits == 1) return;
  const int rows = merge_rows(params.splits, D);
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(unsigned((p.rows() + rows - 1) / rows));
  config.blockDim = dim3(kMergeThreads);
  config.stream = stream;
  cudaLaunchAttribute early{};
  early.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  early.val.programmaticStreamSerializationAllowed = 1;
  if (merge_launches_early()) config.attrs = &early, config.numAttrs = 1;
  const cudaError_t launched =
      cudaLaunchKernelEx(&config, merge_for<T, D>(rows), static_cast<const float*>(params.o_part),
                         static_cast<const float*>(params.lse_part), params.O, params.lse, p.rows(), params.splits);
  if (launched != cudaSuccess) (void)cudaGetLastError();  // reported here, not again by the next check
  CUDA_CHECK(launched);
}

/// The decode kernel's instance for a block of `block_rows` rows (1, 2, 4, 8 or 16).
template <class T, int D, bool kGrouped, bool kBatchedV>
void (*kernel_for(int block_rows))(Params<T>) {
  switch (block_rows) {
    case 1: return decode_split<T, D, 1, kGrouped, kBatchedV>;
    case 2: return decode_split<T, D, 2, kGrouped, kBatchedV>;
    case 4: return decode_split<T, D, 4, kGrouped, kBatchedV>;
    case 8: return decode_split<T, D, 8, kGrouped, kBatchedV>;
    default: return decode_split<T, D, 16, kGrouped, kBatchedV>;
  }
}

/// The decode kernel and, with splits, the merge, for Params already filled but for the
/// split fields (set here): the grid and the block's rows from the problem; `splits`
/// kAutoSplits: as many as fill the SMs once (choose_splits, this kernel's occupancy).
template <class T, int D, bool kGrouped, bool kBatchedV>
void launch(const ft::Problem& p, Params<T> params, int splits, cudaStream_t stream) {
  const int64_t rows = rows_a_head(p, kGrouped);
  const int64_t heads = kGrouped ? p.kv_heads_total() : p.heads_total();
  if (heads > 65535) throw ft::Unsupported("chapter 11: more than 65535 heads in one launch");
  // The block's rows: the next power of two at or above them, at most 16 (more: several
  // blocks a head along z, each reading the K/V head again; unlike decode_mma's, they are
  // not neighbours in the launch order, so L2 may not hold the head for the next).
  const int block_rows = rows <= 1 ? 1 : rows <= 2 ? 2 : rows <= 4 ? 4 : rows <= 8 ? 8 : 16;
  const int64_t chunks = (rows + block_rows - 1) / block_rows;
  const auto kernel = kernel_for<T, D, kGrouped, kBatchedV>(block_rows);
  if (splits == kAutoSplits)
    splits = choose_splits(heads * chunks, p.len_kv, ft::sm_count(), blocks_per_sm(reinterpret_cast<const void*>(kernel)));
  check_splits(p, splits);
  params.splits = splits;
  params.keys_per_split = (p.len_kv + splits - 1) / splits;
  params.rows = int(rows);
  kernel<<<dim3(unsigned(splits), unsigned(heads), unsigned(chunks)), kThreads, 0, stream>>>(params);
  CUDA_CHECK_LAUNCH();
  merge_splits<T, D>(p, params, stream);
}

/// The launch attribute that groups a (chunks, splits, heads) grid's blocks into clusters of
/// one (chunk, head)'s `splits` splits.
cudaLaunchAttribute clusters_of_splits(int splits) {
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = 1, cluster.val.clusterDim.y = unsigned(splits), cluster.val.clusterDim.z = 1;
  return cluster;
}

/// Clusters of `splits` blocks of `kernel` that the GPU runs at once (the runtime's answer,
/// once a kernel and cluster size): a cluster's blocks share a GPC, so this is not the SMs'
/// blocks over `splits` when a GPC's SMs are not a multiple of them.
int active_clusters(const void* kernel, size_t smem, int threads, int splits) {
  static std::mutex lock;
  static std::map<std::tuple<const void*, size_t, int>, int> known;
  const std::lock_guard<std::mutex> hold(lock);
  auto [at, fresh] = known.try_emplace({kernel, smem, splits}, 0);
  if (fresh) {
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(1, unsigned(splits), 1);
    config.blockDim = dim3(unsigned(threads));
    config.dynamicSmemBytes = smem;
    cudaLaunchAttribute cluster = clusters_of_splits(splits);
    config.attrs = &cluster, config.numAttrs = 1;
    // A size the GPU refuses (past 8 without the non-portable opt-in) counts as none fitting:
    // the launch takes the workspace, and the error is not left for the next check.
    if (cudaOccupancyMaxActiveClusters(&at->second, kernel, &config) != cudaSuccess) {
      (void)cudaGetLastError();
      at->second = 0;
    }
  }
  return at->second;
}

/// Step 6's other instances of its kernel, one for each way of merging its splits besides
/// the workspace and decode_merge, and the contiguous cache's instances of the same, which
/// the paged cache's launch asks what fits, so that it merges as the contiguous one does
/// (the program compares the two bit for bit).
template <class T>
struct MergeForms {
  void (*in_cluster)(Params<T>) = nullptr;     ///< merges in a cluster (decode_cluster.cuh)
  void (*cluster_probe)(Params<T>) = nullptr;  ///< the contiguous cache's in_cluster
  void (*in_grid)(Params<T>) = nullptr;        ///< merges after a grid barrier (decode_grid_merge.cuh)
  void (*grid_probe)(Params<T>) = nullptr;     ///< the contiguous cache's in_grid
};

/// Launches `kernel` on `grid` with one launch attribute (clusters, or a cooperative launch),
/// reporting a refusal here rather than at the next check.
template <class T>
void launch_with(void (*kernel)(Params<T>), const Params<T>& params, dim3 grid, int threads, size_t smem,
                 cudaStream_t stream, cudaLaunchAttribute attribute) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid, config.blockDim = dim3(unsigned(threads));
  config.dynamicSmemBytes = smem, config.stream = stream;
  config.attrs = &attribute, config.numAttrs = 1;
  const cudaError_t launched = cudaLaunchKernelEx(&config, kernel, params);
  if (launched != cudaSuccess) (void)cudaGetLastError();  // reported here, not again by the next check
  CUDA_CHECK(launched);
}

/// A decode kernel's grid over chunks of `block_rows` rows of each key/value head, and the
/// merge: the splits as launch's, each a whole number of 128-key block tiles, those the
/// rounding leaves past the keys dropped where the count is the launch's own
/// (splits_with_keys; a forced count keeps them: an empty split's lse −∞ weighs nothing in the
/// merge, which the tests check). The grid is (chunks, splits,
/// heads): a group's chunks of one split run side by side, so that the group reads its keys
/// from device memory once and from L2 for the other chunks. With step 6's other `forms`:
/// where merges_in_cluster says so, the cluster's instance, launched as clusters of a (chunk,
/// head)'s splits; else where merges_in_grid says so, the grid's, launched cooperatively;
/// either way no decode_merge.
template <class T, int D>
void launch_chunks(const ft::Problem& p, Params<T> params, int splits, cudaStream_t stream, void (*kernel)(Params<T>),
                   size_t smem, int block_rows, const char* who, int threads = kThreads,
                   int min_split_keys = kMinSplitKeys, const MergeForms<T>& forms = {}) {
  const int64_t rows = rows_a_head(p, true);
  const int64_t heads = p.kv_heads_total();
  if (heads > 65535) throw ft::Unsupported("chapter 11: more than 65535 heads in one launch");
  const int64_t chunks = (rows + block_rows - 1) / block_rows;
  ft::allow_dynamic_smem(kernel, smem, who);
  if (splits == kAutoSplits)
    splits = splits_with_keys(p.len_kv, choose_splits(heads * chunks, p.len_kv, ft::sm_count(),
                                                      blocks_per_sm(reinterpret_cast<const void*>(kernel), smem,
                                                                    threads),
                                                      min_split_keys));
  check_splits(p, splits);
  params.splits = splits;
  params.keys_per_split = keys_a_split(p.len_kv, splits);
  params.rows = int(rows);
  const dim3 grid{unsigned(chunks), unsigned(splits), unsigned(heads)};
  if (forms.in_cluster && splits >= 2 && splits <= kMaxClusterSplits) {  // the runtime refuses other cluster sizes
    ft::allow_dynamic_smem(forms.in_cluster, smem, who);
    ft::allow_dynamic_smem(forms.cluster_probe, smem, who);
    const int active = active_clusters(reinterpret_cast<const void*>(forms.cluster_probe), smem, threads, splits);
    const size_t part_bytes = size_t(std::min<int64_t>(block_rows, rows)) * D * sizeof(float);  // a block's O / l
    if (merges_in_cluster(splits, chunks * heads, active, part_bytes))
      return launch_with(forms.in_cluster, params, grid, threads, smem, stream, clusters_of_splits(splits));
  }
  if (forms.in_grid) {
    ft::allow_dynamic_smem(forms.in_grid, smem, who);
    ft::allow_dynamic_smem(forms.grid_probe, smem, who);
    // Blocks resident at once: the fewer of this instance's and the contiguous cache's.
    const int per_sm = std::min(blocks_per_sm(reinterpret_cast<const void*>(forms.in_grid), smem, threads),
                                blocks_per_sm(reinterpret_cast<const void*>(forms.grid_probe), smem, threads));
    if (merges_in_grid(splits, rows * heads, chunks * splits * heads, int64_t(per_sm) * ft::sm_count())) {
      params.merge_slices = grid_merge_slices(splits, rows * heads, chunks * splits * heads, threads, D);
      cudaLaunchAttribute cooperative{};
      cooperative.id = cudaLaunchAttributeCooperative;
      cooperative.val.cooperative = 1;
      return launch_with(forms.in_grid, params, grid, threads, smem, stream, cooperative);
    }
  }
  kernel<<<grid, unsigned(threads), smem, stream>>>(params);
  CUDA_CHECK_LAUNCH();
  merge_splits<T, D>(p, params, stream);
}

/// The environment variable that makes a paged block load its first tile's block-table
/// entries after its sequence's length, as the kernels did before first_entries_end, for the
/// measurement of one against the other (steps 5 and 6 with one warpgroup). Unset or empty in
/// every other use.
constexpr const char* kLengthFirstEnv = "FT_CH11_LENGTH_FIRST";

static bool length_first() {
  const char* set = std::getenv(kLengthFirstEnv);
  return set && *set && std::atoi(set) != 0;
}

/// Step 5's kernel (decode_mma: a block a chunk of 16·kRowTiles rows of a key/value head, on
/// the tensor cores) and the merge.
template <class T, int D, bool kPaged, int kRowTiles, bool kLengthFirst = false>
void launch_mma_tiles(const ft::Problem& p, const Params<T>& params, int splits, cudaStream_t stream) {
  if constexpr (kPaged && !kLengthFirst) {
    if (length_first()) return launch_mma_tiles<T, D, true, kRowTiles, true>(p, params, splits, stream);
  }
  launch_chunks<T, D>(p, params, splits, stream, decode_mma<T, D, kPaged, kRowTiles, kLengthFirst>,
                      mma_smem_bytes<D, kRowTiles>(), kMmaRows * kRowTiles, "chapter 11's decode_mma");
}

/// The splits a one-tile decode_mma grid takes to fill the GPU (choose_splits).
template <class T, int D, bool kPaged>
int splits_one_tile(const ft::Problem& p) {
  const auto kernel = decode_mma<T, D, kPaged, 1>;
  const size_t smem = mma_smem_bytes<D, 1>();
  ft::allow_dynamic_smem(kernel, smem, "chapter 11's decode_mma");
  return choose_splits(p.kv_heads_total() * ((rows_a_head(p, true) + kMmaRows - 1) / kMmaRows), p.len_kv,
                       ft::sm_count(), blocks_per_sm(reinterpret_cast<const void*>(kernel), smem));
}

template <class T, int D, bool kPaged = false>
void launch_mma(const ft::Problem& p, Params<T> params, int splits, cudaStream_t stream) {
  if (mma_row_tiles(rows_a_head(p, true), p.len_kv, splits_one_tile<T, D, kPaged>(p)) == 2)
    launch_mma_tiles<T, D, kPaged, 2>(p, params, splits, stream);
  else
    launch_mma_tiles<T, D, kPaged, 1>(p, params, splits, stream);
}

template <class T, int D, bool kPaged, int kWarpgroups, bool kLengthFirst = false>
void launch_wgmma_blocks(const ft::Problem& p, const Params<T>& params, int splits, cudaStream_t stream) {
  if constexpr (kPaged && kWarpgroups == 1 && !kLengthFirst) {
    if (length_first()) return launch_wgmma_blocks<T, D, true, 1, true>(p, params, splits, stream);
  }
  const MergeForms<T> forms{decode_wgmma<T, D, kPaged, kWarpgroups, Merge::kCluster, kLengthFirst>,
                            decode_wgmma<T, D, false, kWarpgroups, Merge::kCluster>,
                            decode_wgmma<T, D, kPaged, kWarpgroups, Merge::kGrid, kLengthFirst>,
                            decode_wgmma<T, D, false, kWarpgroups, Merge::kGrid>};
  launch_chunks<T, D>(p, params, splits, stream,
                      decode_wgmma<T, D, kPaged, kWarpgroups, Merge::kWorkspace, kLengthFirst>,
                      wgmma_smem_bytes<D, kWarpgroups>(), kWgmmaRows * kWarpgroups, "chapter 11's decode_wgmma",
                      kThreads * kWarpgroups, kMinWgmmaSplitKeys, forms);
}

/// Step 6's kernel (decode_wgmma: 64 rows of a key/value head a warpgroup on wgmma, one or
/// two warpgroups a block: wgmma_warpgroups) and the merge. Hopper only: its machine code is
/// sm_90a's.
template <class T, int D, bool kPaged = false>
void launch_wgmma(const ft::Problem& p, const Params<T>& params, int splits, cudaStream_t stream) {
  ft::require_arch(90, "chapter 11's wgmma step");
  const auto two = decode_wgmma<T, D, kPaged, 2>;  // the two-warpgroup grid's splits
  const int64_t rows = rows_a_head(p, true);
  ft::allow_dynamic_smem(two, wgmma_smem_bytes<D, 2>(), "chapter 11's decode_wgmma");
  const int splits_two = choose_splits(
      p.kv_heads_total() * ((rows + kMaxWarpgroups * kWgmmaRows - 1) / (kMaxWarpgroups * kWgmmaRows)), p.len_kv, ft::sm_count(),
      blocks_per_sm(reinterpret_cast<const void*>(two), wgmma_smem_bytes<D, 2>(), kMaxWarpgroups * kThreads),
      kMinWgmmaSplitKeys);
  if (wgmma_warpgroups(rows, keys_a_split(p.len_kv, splits_two)) == 2)
    launch_wgmma_blocks<T, D, kPaged, 2>(p, params, splits, stream);
  else
    launch_wgmma_blocks<T, D, kPaged, 1>(p, params, splits, stream);
}

/// Which tensor-core kernel a variant runs: step 5's, step 6's, or the faster for the
/// problem on this GPU (uses_wgmma).
enum class Tc { kNone, kMma, kWgmma, kBest };

template <class T, int D, bool kPaged = false>
void launch_tc(Tc tc, const ft::Problem& p, const Params<T>& params, int splits, cudaStream_t stream) {
  if (tc == Tc::kWgmma || (tc == Tc::kBest && uses_wgmma(p)))
    launch_wgmma<T, D, kPaged>(p, params, splits, stream);
  else
    launch_mma<T, D, kPaged>(p, params, splits, stream);
}

/// Whether the problem's dtype and head dim are among the compiled instances.
bool compiled_for(const ft::Problem& p) {
  const auto t = Compiled::dtypes();
  const auto d = Compiled::head_dims();
  return std::find(t.begin(), t.end(), p.dtype) != t.end() && std::find(d.begin(), d.end(), p.head_dim) != d.end();
}

/// The split workspace's two parts: each split's O, then each split's lse (max_splits' worth).
template <int D>
std::pair<float*, float*> split_parts(const ft::Problem& p, void* workspace) {
  float* o_part = static_cast<float*>(workspace);
  return {o_part, o_part ? o_part + size_t(max_splits(p.len_kv)) * size_t(p.rows()) * D : nullptr};
}

/// K's and V's head and batch strides: the contiguous cache's, or those of views of a longer
/// one (a decode loop's cache [B, H_kv, capacity, d] filled to N_k rows), which is all the
/// views chapter 11 reads: Q and O contiguous, K and V alike, whole rows of d elements.
std::pair<int64_t, int64_t> kv_strides_of(const ft::Problem& p, const ft::Layout* layout) {
  const ft::Strides kv = ft::kv_strides(p), q = ft::q_strides(p);
  if (!layout) return {kv.batch, kv.head};
  const ft::Layout& l = *layout;
  auto same = [](ft::Strides a, ft::Strides b) { return a.batch == b.batch && a.head == b.head && a.row == b.row; };
  if (!same(l.Q, q) || !same(l.O, q))
    throw ft::Unsupported("chapter 11 reads Q and writes O contiguous [B, H_q, N_q, d]; call .contiguous() on q");
  if (!same(l.K, l.V))
    throw ft::Unsupported("chapter 11 reads K and V laid out alike (one cache layout); give them the same strides");
  if (l.K.row != p.head_dim || l.K.head < int64_t(p.len_kv) * p.head_dim ||
      l.K.batch < l.K.head * p.heads_kv || l.K.head % 8 || l.K.batch % 8)
    throw ft::Unsupported("chapter 11 reads K and V as [B, H_kv, N, d] with whole rows of d elements, each head's "
                          "rows in one run (a cache of any capacity, filled to N_k rows), strides multiples of 8 "
                          "elements (16-byte loads)");
  return {l.K.batch, l.K.head};
}

template <bool kGrouped, bool kSplit, bool kBatchedV, Tc kTc = Tc::kNone>
void run(const ft::Problem& p, const ft::ForwardArgs& a, cudaStream_t stream) {
  check_decode(p);
  const std::pair<int64_t, int64_t> kv = kv_strides_of(p, a.layout);  // (batch, head) strides
  Compiled::dispatch(p, "chapter 11", [&](auto i) {
    using I = decltype(i);
    using T = typename I::Element;
    constexpr int D = I::kHeadDim;
    const auto [o_part, lse_part] = split_parts<D>(p, a.workspace);
    Params<T> params{a.Q.as<T>(), a.K.as<T>(), a.V.as<T>(), a.O.as<T>(), a.lse, o_part, lse_part,
                     p.len_q, p.len_kv, p.heads_q, p.heads_kv, p.group(), p.causal_offset(), p.causal,
                     p.softmax_scale() * ft::kLog2e, 1, 0, 0, p.rows()};
    std::tie(params.kv_batch_stride, params.kv_head_stride) = kv;
    if constexpr (kTc != Tc::kNone) launch_tc<T, D>(kTc, p, params, splits_of(p, kSplit), stream);
    else launch<T, D, kGrouped, kBatchedV>(p, params, splits_of(p, kSplit), stream);
  });
}

/// The ledger: K and V read once a block layout (grouped: once; a block a query head: once a
/// query head, the group's other reads from L2 when they run together), Q read and O written
/// once; with splits, each split's float32 O and lse written and read back by the merge.
template <bool kGrouped, bool kSplit, bool kBatchedV = false>
std::vector<ft::KernelTraffic> traffic(const ft::Problem& p) {
  const double kv = 2.0 * double(p.kv_bytes());
  const double reads_of_kv = kGrouped ? kv : kv * p.group();
  const double q = double(p.q_bytes()), o = double(p.q_bytes()), l = double(p.rows()) * ft::kFloatBytes;
  const int splits = kSplit ? choose_splits(kGrouped ? p.kv_heads_total() : p.heads_total(), p.len_kv,
                                            int(ft::gpu_facts().sms), kLedgerBlocksPerSm)
                            : 1;
  const double part = splits > 1 ? double(splits) * double(p.rows()) * (p.head_dim + 1) * ft::kFloatBytes : 0.0;
  std::vector<ft::KernelTraffic> t{{"decode_split", q + reads_of_kv, splits > 1 ? part : o + l, q + kv,
                                    splits > 1 ? part : o + l, p.forward_flops(),
                                    kGrouped ? "K and V read once for every query head that shares them"
                                                  : "K and V read once a query head (the group's re-reads from L2)"}};
  if (splits > 1)
    t.push_back({"decode_merge", part, o + l, part, o + l, 0.0, "each split's O and lse read once, O written once"});
  return t;
}

/// The tensor-core steps' ledger: K and V requested once a chunk of `block_rows` rows of a
/// group (the chunks of a split run side by side: from device memory once, the others from
/// L2), Q read and O written once, the splits' partial results as in traffic(); `per_sm`
/// blocks a SM. `step6`: the merge in a cluster or after a grid barrier where step 6 takes it.
std::vector<ft::KernelTraffic> traffic_chunks(const ft::Problem& p, int64_t block_rows, int per_sm, int min_split_keys,
                                              const std::string& kernel, const std::string& note,
                                              bool step6 = false) {
  const double kv = 2.0 * double(p.kv_bytes());
  const int sms = int(ft::gpu_facts().sms);
  const int64_t chunks = (rows_a_head(p, true) + block_rows - 1) / block_rows;
  const double q = double(p.q_bytes()), o = double(p.q_bytes()), l = double(p.rows()) * ft::kFloatBytes;
  int splits = splits_with_keys(p.len_kv, choose_splits(p.kv_heads_total() * chunks, p.len_kv, sms, per_sm,
                                                        min_split_keys));
  // `clusters`: step 6 merges in a cluster where the grid's clusters all run at once, taken
  // here as the SMs' blocks over the splits (the GPU's answer, a GPC at a time, may be fewer:
  // an H100 runs 15 clusters of 8 blocks of 145 KB, not 16), with parts of at most 16 KB.
  // The splits' partial results then stay in shared memory: the kernel writes O and lse.
  std::string what = note;
  if (step6 && merges_in_cluster(splits, p.kv_heads_total() * chunks, sms * per_sm / std::max(1, splits),
                                    size_t(std::min(block_rows, rows_a_head(p, true))) * p.head_dim * ft::kFloatBytes)) {
    what += "; its " + std::to_string(splits) + " splits merged in a cluster, in shared memory";
    splits = 1;
  }
  const double part = splits > 1 ? double(splits) * double(p.rows()) * (p.head_dim + 1) * ft::kFloatBytes : 0.0;
  // After a grid barrier the same kernel reads the partial results back and writes O.
  if (step6 && merges_in_grid(splits, p.rows(), p.kv_heads_total() * chunks * splits, int64_t(sms) * per_sm)) {
    what += "; its " + std::to_string(splits) + " splits written, then merged by the same grid after a barrier";
    return {{kernel, q + kv * double(chunks) + part, part + o + l, q + kv + part, part + o + l, p.forward_flops(), what}};
  }
  std::vector<ft::KernelTraffic> t{{kernel, q + kv * double(chunks), splits > 1 ? part : o + l, q + kv,
                                    splits > 1 ? part : o + l, p.forward_flops(), what}};
  if (splits > 1)
    t.push_back({"decode_merge", part, o + l, part, o + l, 0.0, "each split's O and lse read once, O written once"});
  return t;
}

/// Step 5: chunks of 16 or 32 rows (mma_row_tiles), one block a SM (its 132–136 KB of shared
/// memory at d = 128; its 66–68 KB at d = 64 allow three).
std::vector<ft::KernelTraffic> traffic_mma(const ft::Problem& p) {
  const int sms = int(ft::gpu_facts().sms), per_sm = p.head_dim == 64 ? 3 : 1;
  const int64_t rows = rows_a_head(p, true);
  const int splits_one = choose_splits(p.kv_heads_total() * ((rows + kMmaRows - 1) / kMmaRows), p.len_kv, sms, per_sm);
  return traffic_chunks(p, int64_t(kMmaRows) * mma_row_tiles(rows, p.len_kv, splits_one), per_sm, kMinSplitKeys,
                        "decode_mma",
                        "K and V read once for every 16 or 32 query rows that share them (L2 for the group's "
                        "other chunks)");
}

/// Step 6: chunks of 64 or 128 rows (wgmma_warpgroups), one block a SM (145 or 161 KB of
/// shared memory at d = 128; at d = 64 two warpgroups' registers), but for one warpgroup at
/// d = 64 (73 KB: three).
std::vector<ft::KernelTraffic> traffic_wgmma(const ft::Problem& p) {
  const int64_t rows = rows_a_head(p, true);
  const int splits_two = choose_splits(p.kv_heads_total() * ((rows + kMaxWarpgroups * kWgmmaRows - 1) / (kMaxWarpgroups * kWgmmaRows)),
                                       p.len_kv, int(ft::gpu_facts().sms), 1, kMinWgmmaSplitKeys);
  const int warpgroups = wgmma_warpgroups(rows, keys_a_split(p.len_kv, splits_two));
  const int per_sm = p.head_dim == 64 && warpgroups == 1 ? 3 : 1;
  return traffic_chunks(p, int64_t(kWgmmaRows) * warpgroups, per_sm, kMinWgmmaSplitKeys, "decode_wgmma",
                        "K and V read once for every 64 or 128 query rows that share them (L2 for the group's "
                        "other chunks)",
                        /*step6=*/true);
}

/// The ledger of a tensor-core variant; the last step's as the model GPU (Hopper) would choose.
template <Tc kTc>
std::vector<ft::KernelTraffic> traffic_tc(const ft::Problem& p) {
  const bool wgmma =
      kTc == Tc::kWgmma || (kTc == Tc::kBest && wgmma_pays(rows_a_head(p, true), kv_cache_bytes(p)));
  return wgmma ? traffic_wgmma(p) : traffic_mma(p);
}

template <bool kGrouped, bool kSplit, bool kBatchedV = false, Tc kTc = Tc::kNone>
ft::ForwardImpl impl(const std::string& variant, const std::string& what) {
  return {"11", variant, what, Compiled::head_dims(), workspace<kGrouped, kSplit>, run<kGrouped, kSplit, kBatchedV, kTc>,
          kTc == Tc::kNone ? traffic<kGrouped, kSplit, kBatchedV> : traffic_tc<kTc>,
          Compiled::dtypes(), /*min_sm=*/kTc == Tc::kWgmma ? 90 : 80, /*strided=*/true,
          ft::Features{/*lengths=*/true, /*grouped=*/true}};
}


}  // namespace

const ft::ForwardImpl& fastest() {
  // wgmma on Hopper from 16 rows a key/value head, and from 4 on caches of at most 32 MB
  // (uses_wgmma): 1.34-3.21x tensor_cores with 128 rows, 1.00-1.40x with 32, 0.99-1.33x with 16
  // (H100, bf16, d = 128: plots/results/h100/ch11_grid_row32.csv), 1.00-1.26x with 4 or 8 on
  // those short caches (ch11_wgmma_four_rows_ab.csv, ch11_wgmma_rows_ab.csv).
  // tensor_cores below, and on other GPUs: 1.49x batched_v at B = 1, 32 heads on 8, one
  // query row, 32k keys; 4.82x at B = 16 with four rows (H200; plots/results/h200/decode.csv).
  static const ft::ForwardImpl i =
      impl<true, true, false, Tc::kBest>("fastest", "wgmma from 16 rows a key/value head (4 on caches up to 32 MB) "
                                                    "on Hopper, else tensor_cores");
  return i;
}

std::vector<ft::ForwardImpl> forward_impls() {
  return {impl<false, false>("one_block", "a block a (sequence, query head): the keys in one block"),
          impl<false, true>("split_kv", "the keys split across blocks, merged by their lse"),
          impl<true, true>("grouped", "split_kv, a block a key/value head for all its query heads"),
          impl<true, true, true>("batched_v", "grouped, each tile's 32 V rows loaded together"),
          impl<true, true, false, Tc::kMma>("tensor_cores",
                                            "grouped, a key/value head's rows on the tensor cores, 16 or 32 a block"),
          impl<true, true, false, Tc::kWgmma>("wgmma", "tensor_cores on Hopper's wgmma, 64 rows a warpgroup (sm_90a)"),
          fastest()};
}

// ---- the paged cache --------------------------------------------------------------------

/// Pages of a power of two tokens, so that the kernel finds a token's page by a shift (page_of).
static void check_page_size(int page_size) {
  if (page_size < 1 || (page_size & (page_size - 1)) != 0)
    throw ft::Unsupported("paged decode: pages of " + std::to_string(page_size) +
                          " tokens; the kernel takes a power of two (1, 2, 4, ..., 16, ..., 256), so that a "
                          "token's page is a shift, not a division");
}

/// A pool of fewer than 2^31 rows (pages × key/value heads × tokens a page), which
/// paged_offset counts in 32 bits.
static void check_pool_rows(const ft::PagedKvShape& pool) {
  const int64_t rows = int64_t(pool.num_pages) * pool.heads_kv * pool.page_size;
  if (rows > INT_MAX)
    throw ft::Unsupported("paged decode: the pool holds " + std::to_string(rows) + " rows (" +
                          std::to_string(pool.num_pages) + " pages of " + std::to_string(pool.page_size) +
                          " tokens, " + std::to_string(pool.heads_kv) +
                          " key/value heads); the kernel counts rows in 32 bits: split it into pools of "
                          "fewer than 2^31 rows");
}

void check_paged(const ft::Problem& p, const ft::PagedKvShape& pool, const std::vector<int32_t>& tables,
                 int pages_per_seq, const std::vector<int32_t>& lens) {
  check_decode(p);
  if (!compiled_for(p))
    throw ft::Unsupported("chapter 11's paged decode takes bf16 or fp16 at d = 64 or 128 (got " + p.describe() + ")");
  if (p.heads_kv < 1 || p.heads_q % p.heads_kv != 0)
    throw ft::Unsupported("paged decode: " + std::to_string(p.heads_q) + " query heads are not a multiple of " +
                          std::to_string(p.heads_kv) + " key/value heads");
  if (pool.heads_kv != p.heads_kv || pool.head_dim != p.head_dim)
    throw ft::Unsupported("paged decode: the pool holds " + std::to_string(pool.heads_kv) + " key/value heads of d = " +
                          std::to_string(pool.head_dim) + ", the problem " + std::to_string(p.heads_kv) +
                          " of d = " + std::to_string(p.head_dim));
  if (pool.page_size < 1 || pool.num_pages < 1 || pages_per_seq < 1)
    throw ft::Unsupported("paged decode: the pool needs pages of at least one token and each sequence a table");
  check_page_size(pool.page_size);
  check_pool_rows(pool);
  if (int64_t(lens.size()) != p.batch || int64_t(tables.size()) != int64_t(p.batch) * pages_per_seq)
    throw ft::Unsupported("paged decode: " + std::to_string(p.batch) + " sequences need " + std::to_string(p.batch) +
                          " lengths and " + std::to_string(int64_t(p.batch) * pages_per_seq) +
                          " block-table entries (got " + std::to_string(lens.size()) + " and " +
                          std::to_string(tables.size()) + ")");
  int longest = 0;
  for (int b = 0; b < p.batch; ++b) {
    const int len = lens[b], pages = (len + pool.page_size - 1) / pool.page_size;
    if (len < p.len_q)
      throw ft::Unsupported("paged decode: sequence " + std::to_string(b) + " holds " + std::to_string(len) +
                            " tokens, fewer than its " + std::to_string(p.len_q) + " query rows (append them first)");
    if (pages > pages_per_seq)
      throw ft::Unsupported("paged decode: sequence " + std::to_string(b) + " is " + std::to_string(len) +
                            " tokens long, longer than its " + std::to_string(pages_per_seq) + " pages of " +
                            std::to_string(pool.page_size) + " hold");
    for (int i = 0; i < pages; ++i) {
      const int32_t page = tables[int64_t(b) * pages_per_seq + i];
      if (page < 0 || page >= pool.num_pages)
        throw ft::Unsupported("paged decode: sequence " + std::to_string(b) + "'s block table names page " +
                              std::to_string(page) + ", outside the pool's " + std::to_string(pool.num_pages) +
                              " pages");
    }
    longest = std::max(longest, len);
  }
  if (longest != p.len_kv)
    throw ft::Unsupported("paged decode: the problem's len_kv (" + std::to_string(p.len_kv) +
                          ") must be the longest sequence (" + std::to_string(longest) + ")");
}

size_t paged_workspace_bytes(const ft::Problem& p) { return workspace<true, true>(p); }

void decode_paged(const ft::Problem& p, const PagedDecodeArgs& a, cudaStream_t stream) {
  check_decode(p);
  check_page_size(a.pool.page_size);
  check_pool_rows(a.pool);
  // Every table row covers the longest sequence, len_kv: the kernels load a row's entries up
  // to it (first_entries_end), whatever the sequence's own length.
  if (a.pages_per_seq < 1 || int64_t(a.pages_per_seq) * a.pool.page_size < p.len_kv)
    throw ft::Unsupported("paged decode: " + std::to_string(a.pages_per_seq) + " block-table entries a sequence, "
                          "pages of " + std::to_string(a.pool.page_size) + " tokens, hold fewer than len_kv (" +
                          std::to_string(p.len_kv) + "), the longest sequence");
  Compiled::dispatch(p, "chapter 11 (paged)", [&](auto i) {
    using I = decltype(i);
    using T = typename I::Element;
    constexpr int D = I::kHeadDim;
    const auto [o_part, lse_part] = split_parts<D>(p, a.workspace);
    Params<T> params{static_cast<const T*>(a.Q), static_cast<const T*>(a.K_pool), static_cast<const T*>(a.V_pool),
                     static_cast<T*>(a.O), a.lse, o_part, lse_part, p.len_q, p.len_kv, p.heads_q, p.heads_kv,
                     p.group(), p.causal_offset(), p.causal, p.softmax_scale() * ft::kLog2e, 1, 0, 0, p.rows()};
    params.block_table = a.block_tables;
    params.seq_lens = a.seq_lens;
    params.page_size = a.pool.page_size;
    while ((1 << params.page_shift) < params.page_size) ++params.page_shift;  // a power of two: check_paged
    params.pages_per_seq = a.pages_per_seq;
    launch_tc<T, D, true>(Tc::kBest, p, params, splits_of(p, true), stream);
  });
}

// ---- the program's extra rows ------------------------------------------------------------

namespace {

/// The environment variable that keeps the extras' pages in order (sequence b's page i is
/// pool page b·pages_per_seq + i) instead of scattered, to measure what the scattering
/// costs (FT_CH11_PAGES_IN_ORDER=1). Unset or empty in every other use.
constexpr const char* kPagesInOrderEnv = "FT_CH11_PAGES_IN_ORDER";

/// Reads `n` 16-byte words once, four loads in flight a thread, and keeps nothing: the
/// ceiling a decode kernel, which reads its cache once, can reach on this GPU.
__global__ void stream_read(const uint4* __restrict__ src, int64_t n, unsigned* sink) {
  constexpr int kUnroll = 4;  // loads in flight a thread before any is used
  unsigned acc = 0;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (kUnroll - 1) * step < n; i += kUnroll * step) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = src[i + u * step];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += step) acc ^= src[i].x ^ src[i].y ^ src[i].z ^ src[i].w;
  if (acc == 0x9e3779b9u) *sink = acc;  // practically never: the loads stay
}

/// A deterministic value in [−1, 1) for logical element (sequence, head, token, c) of K (key 0)
/// or V (key 1), so the contiguous and the paged copies of a cache hold the same numbers.
__device__ __forceinline__ float cache_value(int64_t index, int key) { return 2.f * ft::hash_unit(uint64_t(index), uint64_t(key)) - 1.f; }

/// Fills the contiguous cache [B, H_kv, N_k, d] (paged == false) or the pool through the block
/// tables (paged == true) with cache_value of each element's logical place.
template <class T>
__global__ void fill_cache(T* dst, int key, int batch, int heads_kv, int len, int d, bool paged,
                           const int32_t* tables, int pages_per_seq, int page_size) {
  const int64_t total = int64_t(batch) * heads_kv * len * d;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    const int c = int(e % d);
    const int pos = int(e / d % len);
    const int h = int(e / (int64_t(d) * len) % heads_kv);
    const int b = int(e / (int64_t(d) * len * heads_kv));
    int64_t at = e;
    if (paged) {
      const int page = tables[int64_t(b) * pages_per_seq + pos / page_size];
      at = ((int64_t(page) * heads_kv + h) * page_size + pos % page_size) * d + c;
    }
    dst[at] = from_float<T>(cache_value(e, key));
  }
}

template <class T>
ft::Row extra_row(const ft::Problem& p, const std::string& variant, const std::string& what, const ft::Timing& t,
                  double bytes) {
  ft::Row r;
  r.chapter = "11";
  r.variant = variant;
  r.what = what;
  r.pass = variant == "stream_read" ? "read" : "forward";
  r.dtype = ft::dtype_name(p.dtype);
  r.batch = p.batch, r.heads = p.heads_q, r.seq_len = p.len_q, r.head_dim = p.head_dim, r.causal = p.causal;
  r.heads_kv = p.heads_kv, r.len_kv = p.len_kv;
  r.causal_align = "bottom-right";
  r.ms = t.median_ms, r.ms_min = t.min_ms, r.ms_max = t.max_ms, r.iters = t.iters;
  r.timing = t.column();
  r.model_bytes = bytes;
  r.gbps = bytes / (t.median_ms * 1e-3) / 1e9;
  r.gpu = ft::gpu_name();
  return r;
}

}  // namespace

void decode_extras(const ft::Options& o, std::vector<ft::Row>& rows) {
  ft::Problem p = o.problem();
  p.align = ft::CausalAlign::BottomRight;
  try {
    check_decode(p);
    if (!compiled_for(p)) throw ft::Unsupported("bf16 or fp16 at d = 64 or 128 only");
  } catch (const ft::Unsupported& e) {
    std::printf("\n(the streaming read and the paged cache: skipped, %s)\n", e.what());
    return;
  }
  const double cache_bytes = 2.0 * double(p.kv_bytes());  // K and V
  const double bytes = cache_bytes + 2.0 * double(p.q_bytes());  // what a decode reads and writes
  constexpr int kPageSizes[] = {16, 64, 256};  // vLLM's default, and larger pages
  Compiled::dispatch(p, "chapter 11 (extras)", [&](auto i) {
    using I = decltype(i);
    using T = typename I::Element;
    const int d = p.head_dim, H = p.heads_kv, L = p.len_kv, B = p.batch;
    const size_t elems = size_t(B) * H * L * d;
    try {
      ft::check_fits(4 * elems * sizeof(T) + size_t(paged_workspace_bytes(p)), "the paged cache beside the contiguous one");
    } catch (const ft::Unsupported& e) {
      std::printf("\n(the streaming read and the paged cache: skipped, %s)\n", e.what());
      return;
    }
    std::printf("\nthe cache read once, and the paged cache (K and V filled alike in both layouts):\n");
    ft::DeviceBuffer<T> K(elems), V(elems), Q(size_t(p.q_bytes() / sizeof(T))), O(size_t(p.q_bytes() / sizeof(T)));
    ft::DeviceBuffer<float> lse(size_t(p.rows()));
    ft::DeviceBuffer<unsigned> sink(1);
    const size_t ws_bytes = paged_workspace_bytes(p);
    ft::DeviceBuffer<float> ws(std::max<size_t>(1, ws_bytes / sizeof(float)));
    const int fill_blocks = int(ft::sm_count()) * 8;
    fill_cache<T><<<fill_blocks, 256>>>(K.get(), 0, B, H, L, d, false, nullptr, 0, 1);
    fill_cache<T><<<fill_blocks, 256>>>(V.get(), 1, B, H, L, d, false, nullptr, 0, 1);
    fill_cache<T><<<fill_blocks, 256>>>(Q.get(), 2, B, p.heads_q, p.len_q, d, false, nullptr, 0, 1);
    CUDA_CHECK_LAUNCH();

    // The ceiling: K's and V's bytes read once by a kernel that does nothing else.
    const ft::Timing read = ft::time_on_gpu(
        [&](cudaStream_t s) {
          const int blocks = int(ft::sm_count()) * 4;
          stream_read<<<blocks, 512, 0, s>>>(reinterpret_cast<const uint4*>(K.get()), int64_t(elems * sizeof(T) / 16),
                                             sink.get());
          stream_read<<<blocks, 512, 0, s>>>(reinterpret_cast<const uint4*>(V.get()), int64_t(elems * sizeof(T) / 16),
                                             sink.get());
        },
        o.warmup, o.iters, true, 0, o.graph);
    rows.push_back(extra_row<T>(p, "stream_read", "K and V read once, nothing else: the ceiling", read, cache_bytes));
    const double ceiling = rows.back().gbps;
    std::printf("  %-12s %9.3f ms %7.0f GB/s\n", "stream_read", read.median_ms, ceiling);

    // The contiguous cache through fastest's kernel on these values, then the paged one at
    // each page size.
    auto contiguous = [&](cudaStream_t s) {
      const auto [o_part, lse_part] = split_parts<I::kHeadDim>(p, ws.get());
      Params<T> params{Q.get(), K.get(), V.get(), O.get(), lse.get(), o_part, lse_part, p.len_q, p.len_kv,
                       p.heads_q, p.heads_kv, p.group(), p.causal_offset(), p.causal,
                       p.softmax_scale() * ft::kLog2e, 1, 0, 0, p.rows()};
      std::tie(params.kv_batch_stride, params.kv_head_stride) = kv_strides_of(p, nullptr);
      launch_tc<T, I::kHeadDim>(Tc::kBest, p, params, splits_of(p, true), s);
    };
    contiguous(0);
    CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<T> want = O.download();
    const ft::Timing tc = ft::time_on_gpu(contiguous, o.warmup, o.iters, true, 0, o.graph);
    rows.push_back(extra_row<T>(p, "contiguous", "fastest on this cache, for the paged rows", tc, bytes));
    std::printf("  %-12s %9.3f ms %7.0f GB/s %5.1f%% of the read\n", "contiguous", tc.median_ms, rows.back().gbps,
                100.0 * rows.back().gbps / ceiling);

    std::mt19937 rng(uint32_t(o.seed));
    const char* asked = std::getenv(kPagesInOrderEnv);
    const bool in_order = asked && *asked && std::atoi(asked) != 0;
    for (int ps : kPageSizes) {
      const int pages_per_seq = (L + ps - 1) / ps;
      ft::PagedKvShape pool{B * pages_per_seq, ps, H, d};
      std::vector<int32_t> tables(size_t(B) * pages_per_seq), lens(size_t(B), L);
      std::iota(tables.begin(), tables.end(), 0);
      if (!in_order) std::shuffle(tables.begin(), tables.end(), rng);  // pages scattered, as a server's are
      check_paged(p, pool, tables, pages_per_seq, lens);
      ft::DeviceBuffer<int32_t> dtables(tables.size()), dlens(lens.size());
      dtables.upload(tables);
      dlens.upload(lens);
      ft::DeviceBuffer<T> Kp(size_t(pool.elements())), Vp(size_t(pool.elements()));
      fill_cache<T><<<fill_blocks, 256>>>(Kp.get(), 0, B, H, L, d, true, dtables.get(), pages_per_seq, ps);
      fill_cache<T><<<fill_blocks, 256>>>(Vp.get(), 1, B, H, L, d, true, dtables.get(), pages_per_seq, ps);
      CUDA_CHECK_LAUNCH();
      PagedDecodeArgs a;
      a.Q = Q.get(), a.K_pool = Kp.get(), a.V_pool = Vp.get(), a.O = O.get(), a.lse = lse.get();
      a.block_tables = dtables.get(), a.seq_lens = dlens.get(), a.pages_per_seq = pages_per_seq, a.pool = pool;
      a.workspace = ws.get();
      O.poison();
      decode_paged(p, a, 0);
      CUDA_CHECK(cudaDeviceSynchronize());
      const std::vector<T> got = O.download();
      const size_t differ = size_t(std::count_if(got.begin(), got.end(), [&, k = size_t(0)](const T& x) mutable {
        return std::memcmp(&x, &want[k++], sizeof(T)) != 0;
      }));
      const ft::Timing t =
          ft::time_on_gpu([&](cudaStream_t s) { decode_paged(p, a, s); }, o.warmup, o.iters, true, 0, o.graph);
      const std::string name = "paged_" + std::to_string(ps);
      rows.push_back(extra_row<T>(p, name, "fastest through block tables, pages of " + std::to_string(ps) +
                                               (in_order ? " tokens, in order" : " tokens, scattered"), t, bytes));
      rows.back().rel_err = double(differ) / double(got.size());  // the share of O's elements not bit-equal
      std::printf("  %-12s %9.3f ms %7.0f GB/s %5.1f%% of the read, %.3fx contiguous; O %s the contiguous kernel's\n",
                  name.c_str(), t.median_ms, rows.back().gbps, 100.0 * rows.back().gbps / ceiling,
                  tc.median_ms / t.median_ms, differ == 0 ? "bit-equal to" : "DIFFERS from");
      if (differ != 0)
        throw std::runtime_error("chapter 11: the paged decode's O differs from the contiguous one's in " +
                                 std::to_string(differ) + " elements (pages of " + std::to_string(ps) + ")");
    }
  });
}

}  // namespace ch11

FT_REGISTER(ch11) {
  for (const auto& impl : ch11::forward_impls()) {
    const bool fastest = impl.variant == ch11::fastest().variant;
    ft::register_forward(impl, /*headline=*/fastest, /*tour=*/false, /*decode=*/fastest);
  }
}
