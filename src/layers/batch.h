#pragma once
// The ragged batch every forward call takes: several sequences, each contributing some new tokens (a prompt
// chunk, one decode token, or k+1 tokens to verify), packed back to back. Layers read the token ranges from
// cu_seqlens and their memory through the block tables, slot mapping and state slots below, which the model fills
// from the memory pool before the layers run; a layer never looks at the Sequence objects themselves.
// Single-prompt generation is a batch of one.
#include <cstdint>
#include <span>
#include <vector>

#include "state/cache_manager.h"
#include "state/sequence.h"

namespace attnzoo {

struct Batch {
  std::vector<int32_t> tokens;         // all new tokens, sequence after sequence
  std::vector<int32_t> positions;      // one per token (RoPE position)
  std::vector<int32_t> cu_seqlens{0};  // [num_sequences + 1] offsets into tokens
  std::vector<Sequence*> sequences;    // whose memory the tokens extend (the model's side only)
  // Speculative verification on a model with state layers: run the tokens one at a time and checkpoint each
  // sequence's state after every one (CacheManager::checkpoint), so Model::rollback restores without recomputing.
  bool checkpoint_each_token = false;
  // A fresh sequence may take a cached prefix of its tokens inside Model::forward; false when its caller (the
  // scheduler, at admission) looked the prefix up already, so it is neither looked up nor counted twice.
  bool reuse_cached_prefix = true;

  // Filled by Model::forward from the pool (what the layers read):
  std::vector<int32_t> context_lens;   // [S] tokens already cached before this call
  std::vector<int32_t> cache_seqlens;  // [S] tokens cached after it (context + new), flash-attn's name
  std::vector<BlockTables> block_groups;  // one per block group of the pool (CacheManager::layout())
  std::vector<int32_t> state_slots;    // [S] each sequence's recurrent-state slot

  // Appends a sequence's new tokens at positions seq.length(), seq.length() + 1, ...
  void add(Sequence& seq, std::span<const int32_t> ids) {
    sequences.push_back(&seq);
    for (size_t i = 0; i < ids.size(); ++i) {
      tokens.push_back(ids[i]);
      positions.push_back(int32_t(seq.length() + int64_t(i)));
    }
    cu_seqlens.push_back(int32_t(tokens.size()));
  }
  // Empty again, every list keeping its capacity (a batch reused step after step allocates nothing).
  void clear() {
    tokens.clear();
    positions.clear();
    cu_seqlens.assign(1, 0);
    sequences.clear();
    checkpoint_each_token = false;
    reuse_cached_prefix = true;
    context_lens.clear();
    cache_seqlens.clear();
    for (BlockTables& g : block_groups) {
      g.block_tables.clear();
      g.max_blocks = 0;
      g.slot_mapping.clear();
    }
    state_slots.clear();
  }
  int64_t num_tokens() const { return int64_t(tokens.size()); }
  int64_t num_sequences() const { return int64_t(cu_seqlens.size()) - 1; }
  int64_t seq_begin(int64_t s) const { return cu_seqlens[size_t(s)]; }
  int64_t seq_len(int64_t s) const { return cu_seqlens[size_t(s) + 1] - cu_seqlens[size_t(s)]; }
  // The block tables and slot mapping the layer handed `memory` reads.
  const BlockTables& tables(const LayerMemory& memory) const { return block_groups[size_t(memory.block_group)]; }
};

// Fills the memory fields the layers read (context_lens, cache_seqlens, block tables, slot_mapping, state slots)
// from the sequences' current state in `cache`; their new tokens must already be reserved (CacheManager::reserve).
void fill_batch_memory(const CacheManager& cache, Batch& batch);

}  // namespace attnzoo
