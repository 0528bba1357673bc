#pragma once
// Block-sparse visibility (Longformer / BigBird / Sparse-Transformer patterns) at a granularity of `block`
// tokens. Built once from a small description and reused across calls and heads; kernels skip whole tiles
// whose blocks are all invisible. Positions are relative to the start of each sequence.
#include <cstdint>
#include <string>
#include <vector>

namespace attnzoo {

struct BlockMaskSpec {
  int64_t seq_len = 0;        // longest sequence the mask covers
  int64_t block = 64;         // tokens per block
  int64_t local_blocks = 1;   // query block b sees key blocks b-local+1 .. b+local-1 (a band)
  int64_t global_tokens = 0;  // the first ceil(global_tokens/block) blocks see and are seen by all
  int64_t stride = 0;         // >0: every key block with index % stride == stride-1 is seen by all (summary blocks)
  int64_t random_blocks = 0;  // each query block also sees this many key blocks drawn with `seed`
  uint64_t seed = 0;
};

class BlockMask {
 public:
  // Throws ArgumentError naming the offending field.
  explicit BlockMask(const BlockMaskSpec& spec);

  const BlockMaskSpec& spec() const { return spec_; }
  int64_t block() const { return spec_.block; }
  int64_t num_blocks() const { return num_blocks_; }
  bool block_visible(int64_t qb, int64_t kb) const { return bits_[size_t(qb * num_blocks_ + kb)] != 0; }
  bool allows(int64_t qpos, int64_t kpos) const {
    return block_visible(qpos / spec_.block, kpos / spec_.block);
  }
  // Fraction of (query block, key block) pairs that are visible (before causal masking).
  double density() const;
  const std::vector<uint8_t>& bits() const { return bits_; }

 private:
  BlockMaskSpec spec_;
  int64_t num_blocks_ = 0;
  std::vector<uint8_t> bits_;  // [num_blocks, num_blocks], row = query block
};

}  // namespace attnzoo
