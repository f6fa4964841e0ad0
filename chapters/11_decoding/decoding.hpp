/// @file decoding.hpp
/// @brief Chapter 11: decoding, a few query rows a sequence against a long K/V cache (bf16
/// and fp16, d = 64 and 128), as a staircase of variants.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <cuda_runtime.h>

#include "core/paged_kv.hpp"
#include "harness/harness.hpp"
#include "harness/options.hpp"
#include "harness/table.hpp"

namespace ch11 {

/// The chapter's recommended decode (the alias ch11).
const ft::ForwardImpl& fastest();

/// The staircase, one idea a step, then fastest.
std::vector<ft::ForwardImpl> forward_impls();

/// A split of steps 2-5 reads at least this many keys: below it the block's start and the
/// merge's extra pass are a larger share than the parallelism they buy (two rounds of 4
/// warps × 32 keys).
constexpr int kMinSplitKeys = 256;

/// Splits of the keys for `blocks` blocks of work over `len_kv` keys on `sms` SMs that each
/// hold `blocks_per_sm` blocks at once: as many as fill those places once and no more (a
/// block past them waits for a second wave), none under `min_split_keys` keys, at most
/// kMaxSplits. Step 6 passes one 128-key block tile (kMinWgmmaSplitKeys in decoding.cu).
int choose_splits(int64_t blocks, int len_kv, int sms, int blocks_per_sm, int min_split_keys = kMinSplitKeys);

/// Step 5's m16 row tiles a block (1 or 2), for a key/value head of `rows` rows over `len_kv`
/// keys and a one-tile grid that would take `splits_one` splits. Two tiles make each fragment
/// of K and V a warp loads serve 32 rows, not 16 in each of two blocks, but each block's
/// tile takes longer and, with half the blocks, filling the GPU takes twice the splits (and
/// twice the merge's work). Measured with 32 heads on one (ch11_row_tiles.csv,
/// decode_vs_pytorch.csv): two tiles lose at B = 1 (66 splits) and where a split is short
/// (B = 16 at 1,024 and 8,192 keys), and win 1.13–1.38× where few long splits fill the GPU.
/// So two when a head has more than 16 rows and one tile needs at most 8 splits
/// (kMostSplitsForTwoTiles) of at least 4,096 keys (kLeastKeysForTwoTiles);
/// FT_CH11_ROW_TILES's count when that is set.
int mma_row_tiles(int64_t rows, int len_kv, int splits_one);

/// Whether the last step (and the paged decode) runs step 6's kernel, decode_wgmma, rather
/// than step 5's: on Hopper (sm_90, whose wgmma no other GPU runs) for a key/value head of
/// `rows` rows (the group's query heads × N_q) from 16 on, and from 4 on where K and V
/// together hold at most 32 MB (`cache_bytes`): wgmma_pays. Step 6 measured 0.98-3.20x step 5
/// from 16 rows (ch11_wgmma_grid.csv); with 4 or 8 rows 1.00-1.26x on caches of 2-32 MB and
/// 0.98-1.00x on longer ones, with 1 or 2 rows 0.98x (ch11_wgmma_four_rows_ab.csv,
/// ch11_wgmma_rows_ab.csv); FT_CH11_WGMMA's choice when that is set (1: wherever the GPU
/// runs it, 0: never).
bool wgmma_pays(int64_t rows, int64_t cache_bytes);
bool uses_wgmma(const ft::Problem& problem);

/// The keys each of `splits` splits of `len_kv` keys reads: a whole number of 128-key block
/// tiles, the last split the rest (a split past the keys reads none).
int keys_a_split(int len_kv, int splits);

/// The splits of `splits` that read a key once each is rounded up to whole tiles: choose_splits'
/// count less those left past the keys (B = 1 with 32 heads on one and four query rows at
/// 32k keys: 66 splits of 512 keys, the last two empty, 64 kept), so that no block starts only
/// to write an empty result and the merge reads no empty split.
/// FT_CH11_EMPTY_SPLITS=1 keeps them, for the measurement of one against the other.
int splits_with_keys(int len_kv, int splits);

/// Step 6's warpgroups a block (64 rows each) for a key/value head of `rows` rows whose
/// two-warpgroup grid would give each split `keys_a_split_two` keys. Two make each K/V tile
/// serve 128 rows (one copy into shared memory where one warpgroup's grid makes two, the
/// second from L2), run one warpgroup's softmax while the other's products do and, through
/// pages, find each row's offset once; one puts a split's two halves of the rows on two SMs
/// at once, presumably what counts where a split is short (not profiled). Measured at 128
/// rows (H100, ch11_wgmma_warpgroups_hybrid.csv, splits of at least 256 keys then), two
/// against one: 0.85-0.93x at 256 keys a split, 0.97-1.01x at 512, 0.99-1.15x at 1,024 and
/// 1.08-1.30x from 2,048; through pages of 16 tokens 0.88-1.04x, 1.04-1.08x, 1.10-1.49x and
/// 1.26-1.82x. So two past 64 rows where a split of theirs reads at least 1,024 keys
/// (kLeastKeysForTwoWarpgroups), on either cache; FT_CH11_WARPGROUPS's count when set.
int wgmma_warpgroups(int64_t rows, int keys_a_split_two);

/// Whether step 6 merges its `splits` splits in thread block clusters (decode_cluster.cuh),
/// one cluster of `splits` blocks a (chunk, head), rather than through the workspace and
/// decode_merge: for 2 to 8 splits (kMaxClusterSplits) where all `clusters` of the grid
/// run at once, `active` being how many the GPU holds (the runtime's occupancy for
/// clusters), and a block's partial result (its rows' O, `part_bytes`) is at most 16 KB.
/// More clusters than fit run in waves that leave SMs idle, where single blocks fill them:
/// 0.76-0.77x the workspace at B = 16 with 32 heads on one and at B = 2 with 32 on 8 (16
/// clusters of 8, where an H100 runs 15). Measured on an H100 at 1,024 keys, clusters that
/// fit (ch11_cluster_merge_rule_ab.csv): 1.07-1.11x the workspace with 16 or 32 rows a
/// block at d = 128 (8 and 16 KB parts), 1.02-1.04x with 32 and 64 rows at d = 64 (8 and
/// 16 KB), 0.95-0.97x with 64 rows at d = 128 (32 KB). FT_CH11_CLUSTER's choice when set
/// (1: wherever the splits are few enough and a cluster fits, 0: never).
bool merges_in_cluster(int splits, int64_t clusters, int active, size_t part_bytes);

/// Whether step 6, where it does not merge in a cluster, merges its `splits` splits inside the
/// decode kernel after a barrier across the grid (decode_grid_merge.cuh), rather than in
/// decode_merge: only where the grid's `blocks` all run at once (`resident`: the SMs' blocks
/// at the kernel's occupancy; the launch is cooperative, which the runtime refuses
/// otherwise), and there where the launch's query `rows` are no more than its blocks, so that
/// no block merges two rows one after the other. FT_CH11_GRID_MERGE's choice when set (1:
/// wherever the grid runs at once, 0: never).
bool merges_in_grid(int splits, int64_t rows, int64_t blocks, int64_t resident);

/// The slices of its columns each query row's merge is cut into after the grid's barrier, a
/// block a slice (1, 2 or 4), for `splits` splits, `rows` query rows, a grid of `blocks` blocks
/// of `block_threads` threads, head dimension `head_dim`. A row stays whole where its threads
/// weigh every split in one batch of kMergeBatch loads a thread: more slots would only
/// lengthen their final merge (0.97-0.98x at B = 1 with 32 heads on 8, 8k keys, on an H100).
/// Else the fewest slices that take every split in one batch, as long as no block gets two:
/// one query row at B = 1 with 32 heads on one, 32k keys, 128 splits at d = 128 on blocks of
/// 128 threads, waits on L2 once where a whole row waited twice. FT_CH11_GRID_MERGE_SLICES's
/// choice when set (1, 2 or 4).
int grid_merge_slices(int splits, int64_t rows, int64_t blocks, int block_threads, int head_dim);

/// Query rows a block of the merge (decode_merge) takes for `splits` splits at head dimension
/// `head_dim`: 8, 4, 2 or 1, as many as leave each row's slots (256 threads / rows / (d/4)
/// columns' threads) enough to load every split in one batch of 16 a thread. Few splits
/// would leave a row's slots idle; many need them all.
int merge_rows(int splits, int head_dim);

/// Whether a decode step launches its merge while the decode kernel runs (Hopper's
/// programmatic dependent launch): a GPU of sm_90 or later, the merge compiled for one
/// (decode_merge's PTX version at least 9.0), and FT_CH11_PDL not set to 0.
bool merge_launches_early();

/// A decode step over a paged KV cache (core/paged_kv.hpp's layout): `problem` gives the batch
/// (B sequences), the heads, N_q, d, the dtype and the mask (bottom-right: each sequence's
/// own decode position); its len_kv is the longest sequence. Device pointers: Q [B, H_q, N_q,
/// d] and O the same, lse [B, H_q, N_q], the K and V pools, the block tables [B, pages_per_seq]
/// and each sequence's length [B]; the workspace paged_workspace_bytes() long.
struct PagedDecodeArgs {
  const void* Q = nullptr;
  const void* K_pool = nullptr;
  const void* V_pool = nullptr;
  void* O = nullptr;
  float* lse = nullptr;
  const int32_t* block_tables = nullptr;
  const int32_t* seq_lens = nullptr;
  int pages_per_seq = 0;
  ft::PagedKvShape pool;
  void* workspace = nullptr;
};

/// Refuses, with a message that says what to change, what decode_paged cannot read safely,
/// from host copies of the block tables ([B · pages_per_seq]) and lengths ([B]): a length
/// below N_q or above the sequence's pages, a page index outside the pool (in the pages a
/// sequence uses), a pool whose heads or d differ from the problem's, query heads not a
/// multiple of the key/value heads, and what the decode kernels refuse (dtype, d, N_q > 16).
void check_paged(const ft::Problem& problem, const ft::PagedKvShape& pool, const std::vector<int32_t>& block_tables,
                 int pages_per_seq, const std::vector<int32_t>& seq_lens);

/// The workspace decode_paged needs (each split's O and lse).
size_t paged_workspace_bytes(const ft::Problem& problem);

/// Launches the paged decode (the last step's kernel reading through the block tables). Call
/// check_paged on the same tables first: this launch trusts their entries and lengths (none
/// above len_kv). It refuses (ft::Unsupported) only what it can see without them: pages not a
/// power of two, rows of the table that cannot hold len_kv tokens, a pool of 2^31 rows or more
/// (the kernels count its rows in 32 bits). A row's entries are read up to ⌈len_kv /
/// page_size⌉, its sequence's own pages or not: set them all (unused ones to any page).
void decode_paged(const ft::Problem& problem, const PagedDecodeArgs& args, cudaStream_t stream);

/// The chapter's extra rows of the program: the copy-free ceiling (a kernel that only reads
/// a buffer the size of the problem's K/V cache) and the paged decode at several page sizes,
/// each timed on the problem of the command line.
void decode_extras(const ft::Options& options, std::vector<ft::Row>& rows);

}  // namespace ch11
