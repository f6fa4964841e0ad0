/// @file paged_kv.hpp
/// @brief A paged KV cache, as serving systems keep one (vLLM's PagedAttention, FlashInfer):
/// the keys and values of many sequences of different lengths in fixed-size pages drawn from
/// one pool, each sequence's pages listed in its block table. The decode chapter's kernel
/// reads K and V through it; this file is its layout, the address arithmetic, and a host
/// model of the cache (allocate, append, gather) that the tests and the CPU reference use.
/// (The kernel's own arithmetic, chapter 11's page_of and paged_offset, is the same with a
/// shift and a mask: it takes pages of a power of two tokens.)
///
/// Why pages. A contiguous cache reserves max_len rows for every sequence; sequences end at
/// different lengths and grow one token at a time, so most of that memory idles. Pages of
/// `page_size` tokens are handed out as a sequence grows and returned when it ends; the waste
/// is less than one page a sequence.
///
/// Layout of the pool (K and V alike), "HND" within a page:
///
///     pool[page][head][slot][c]      page < num_pages, head < heads_kv,
///                                    slot < page_size, c < head_dim
///
/// so that one key/value head's rows of one page are page_size·d contiguous elements: a
/// kernel reading head h of a sequence reads whole pages of it, each a plain 2-d tile.
/// Token `pos` of a sequence lies in page block_table[pos / page_size], slot pos % page_size.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#ifndef FT_HOST_DEVICE  // as core/strides.hpp defines it
#if defined(__CUDACC__)
#define FT_HOST_DEVICE __host__ __device__
#else
#define FT_HOST_DEVICE
#endif
#endif

namespace ft {

/// The pool's shape: how many pages, how many tokens a page, the key/value heads and d.
struct PagedKvShape {
  int num_pages = 0;
  int page_size = 0;  ///< tokens a page
  int heads_kv = 0;
  int head_dim = 0;

  /// Elements of one pool (K's or V's).
  int64_t elements() const { return int64_t(num_pages) * page_size * heads_kv * head_dim; }
};

/// Element index of (page, head, slot, c) in a pool.
FT_HOST_DEVICE inline int64_t paged_index(const PagedKvShape& s, int page, int head, int slot, int c) {
  return ((int64_t(page) * s.heads_kv + head) * s.page_size + slot) * s.head_dim + c;
}

/// Where token `pos` of a sequence lies: the page its block table names, and the slot in it.
struct PageSlot {
  int page;
  int slot;
};
FT_HOST_DEVICE inline PageSlot page_slot(const int32_t* block_table, int page_size, int pos) {
  return {block_table[pos / page_size], pos % page_size};
}

/// The host model of a paged cache: two pools (K, V), a free list, and per sequence its block
/// table and length. What a serving loop does with it: add a sequence, append the new tokens'
/// K and V after each step (prefill appends many, decode one), and release it when done.
template <typename T>
class PagedKvCache {
 public:
  explicit PagedKvCache(PagedKvShape shape) : shape_(shape), K_(shape.elements()), V_(shape.elements()) {
    if (shape.num_pages < 1 || shape.page_size < 1 || shape.heads_kv < 1 || shape.head_dim < 1)
      throw std::invalid_argument("paged KV cache: pages, page size, heads and head dim must be positive");
    for (int p = shape.num_pages - 1; p >= 0; --p) free_.push_back(p);
  }

  const PagedKvShape& shape() const { return shape_; }
  const std::vector<T>& K() const { return K_; }
  const std::vector<T>& V() const { return V_; }

  /// A new, empty sequence; returns its index.
  int add_sequence() {
    tables_.emplace_back();
    lengths_.push_back(0);
    return int(lengths_.size()) - 1;
  }
  int length(int seq) const { return lengths_.at(seq); }
  const std::vector<int32_t>& block_table(int seq) const { return tables_.at(seq); }
  int free_pages() const { return int(free_.size()); }

  /// Appends `count` tokens to sequence `seq`: k and v are [count][heads_kv][head_dim] (a
  /// projection's output rows). Takes pages from the pool as the sequence crosses a page
  /// boundary; refuses, changing nothing, when the pool has too few.
  void append(int seq, const T* k, const T* v, int count) {
    const int len = lengths_.at(seq), ps = shape_.page_size;
    const int needed = (len + count + ps - 1) / ps - int(tables_[seq].size());
    if (needed > free_pages())
      throw std::runtime_error("paged KV cache: " + std::to_string(needed) + " more pages needed, " +
                               std::to_string(free_pages()) + " free; release a sequence or make the pool larger");
    for (int i = 0; i < needed; ++i) {
      tables_[seq].push_back(free_.back());
      free_.pop_back();
    }
    const int H = shape_.heads_kv, d = shape_.head_dim;
    for (int t = 0; t < count; ++t) {
      const PageSlot at = page_slot(tables_[seq].data(), ps, len + t);
      for (int h = 0; h < H; ++h)
        for (int c = 0; c < d; ++c) {
          const int64_t src = (int64_t(t) * H + h) * d + c;
          K_[paged_index(shape_, at.page, h, at.slot, c)] = k[src];
          V_[paged_index(shape_, at.page, h, at.slot, c)] = v[src];
        }
    }
    lengths_[seq] = len + count;
  }

  /// Returns the sequence's pages to the pool; the sequence is then empty.
  void release(int seq) {
    for (auto it = tables_.at(seq).rbegin(); it != tables_[seq].rend(); ++it) free_.push_back(*it);
    tables_[seq].clear();
    lengths_[seq] = 0;
  }

  /// The sequence's K (or V) as the contiguous layout contract has it, [heads_kv][len][d]:
  /// what the reference and the contiguous kernels read.
  std::vector<T> gather(int seq, bool values) const {
    const int len = lengths_.at(seq), H = shape_.heads_kv, d = shape_.head_dim;
    const std::vector<T>& pool = values ? V_ : K_;
    std::vector<T> out(int64_t(H) * len * d);
    for (int h = 0; h < H; ++h)
      for (int pos = 0; pos < len; ++pos) {
        const PageSlot at = page_slot(tables_[seq].data(), shape_.page_size, pos);
        for (int c = 0; c < d; ++c) out[(int64_t(h) * len + pos) * d + c] = pool[paged_index(shape_, at.page, h, at.slot, c)];
      }
    return out;
  }

 private:
  PagedKvShape shape_;
  std::vector<T> K_, V_;
  std::vector<int> free_;                    ///< pages not in any block table, last one handed out first
  std::vector<std::vector<int32_t>> tables_;  ///< per sequence: its pages, in token order
  std::vector<int> lengths_;                 ///< per sequence: tokens appended
};

}  // namespace ft
