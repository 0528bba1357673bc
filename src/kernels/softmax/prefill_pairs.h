#pragma once
// K^T and V of a bf16 prefill as the bf16 pairs the tile products multiply (kernels/common/bf16_dot.h), packed
// once per (sequence, kv head) before the query blocks run. Packing inside each query block's task repeated it
// for every block of queries: with AMX tiles the products became cheap enough that the repeats cost as much as
// the products at T=4096. Tile t of keys [t * block_k, (t + 1) * block_k) holds K^T as (D/2) x block_k pairs
// along d, then V as (block_k/2) x Dvp pairs along keys; keys past the sequence and columns past Dv are zero.
// Only the tiles some query of the sequence may see are packed (a sliding window over a long cache packs its
// window, not the cache): at most a copy as large as K and V.
#include <cstdint>
#include <vector>

#include "core/aligned_buffer.h"
#include "kernels/softmax/problem.h"
#include "kernels/softmax/tiling.h"

namespace attnzoo {

class PackedKeyValues {
 public:
  // Packs every sequence's keys for every kv head, in parallel over (sequence, kv head) on the global pool.
  // Needs bf16 K and V; paged caches are read through their block tables.
  PackedKeyValues(const AttentionProblem& p, int64_t block_k, int64_t dv_padded);

  // Tile `tile` counts from the sequence's first key; tiles [first, end) are packed.
  int64_t first_packed_tile(int64_t seq) const { return tile_begin_[size_t(seq)]; }
  int64_t end_packed_tile(int64_t seq) const {
    return tile_begin_[size_t(seq)] + seq_size_[size_t(seq)] / tile_size_;
  }
  const uint32_t* key_tile(int64_t seq, int64_t kv_head, int64_t tile) const {
    return data_.data() + first_tile(seq, kv_head) + (tile - tile_begin_[size_t(seq)]) * tile_size_;
  }
  const uint32_t* value_tile(int64_t seq, int64_t kv_head, int64_t tile) const {
    return key_tile(seq, kv_head, tile) + key_size_;
  }

 private:
  int64_t first_tile(int64_t seq, int64_t kv_head) const {
    return seq_begin_[size_t(seq)] + kv_head * seq_size_[size_t(seq)];
  }

  int64_t key_size_ = 0, tile_size_ = 0;  // pairs
  std::vector<int64_t> seq_begin_, seq_size_;  // per sequence: offset of its kv head 0, pairs per kv head
  std::vector<int64_t> tile_begin_;            // per sequence: its first packed tile
  AlignedBuffer<uint32_t> data_;
};

}  // namespace attnzoo
