#pragma once
// The bookkeeping half of a memory pool (vLLM v1's KV cache manager): which KV blocks and recurrent-state slots
// belong to which sequence, never the memory itself (that is CacheStorage, owned by the model that computes).
// Sized once from a CacheGeometry and never grown:
//   - fixed-size KV blocks (`block_tokens` tokens each) from one free list, handed to block groups (vLLM's KV-cache
//     groups, BlockLayout in cache_spec.h): block b is row b of each of the storage's paged slots, and the layers
//     of the group holding it keep their K/V there, one per slot. Most models are one group (every paged layer,
//     one block table per sequence); a model mixing full attention and sliding windows has a group per window
//     (per `slots` layers of it), each with its own block table per sequence, so the windowed groups give back
//     the blocks their window left while the full group keeps the context. Reference counts let forks and the
//     prefix cache share blocks, and a shared, partly filled block is copied before anyone writes into it (copy
//     on write);
//   - fixed-size recurrent-state slots for the linear / SSM layers: one per running sequence, plus snapshot
//     slots that keep the state at block-aligned prefix boundaries, so a cached prefix restores both its KV
//     blocks and its recurrent state (hybrid models get prefix caching too).
// What its decisions need done to the memory (a block copied on write, a state slot zeroed, forked, snapshotted,
// checkpointed or restored) it queues as CacheOps, in order; flush() hands them to the storage, and every forward
// pass flushes before it computes, so the runner sees memory exactly as the bookkeeping describes it.
// Running out is reported before anything is changed (PoolExhausted), so the caller can wait, preempt or fail
// one request while every other sequence's cache stays intact.
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "state/block_pool.h"
#include "state/cache_spec.h"
#include "state/cache_geometry.h"
#include "state/cache_ops.h"
#include "state/cache_storage.h"
#include "state/layer_memory.h"
#include "state/sequence.h"

namespace attnzoo {

struct PoolStats {
  int64_t num_blocks = 0, free_blocks = 0, cached_blocks = 0, block_bytes = 0;
  int64_t state_slots = 0, free_state_slots = 0, snapshot_slots = 0, snapshots = 0, state_slot_bytes = 0;
  int64_t bytes = 0;
  int64_t prefix_queries = 0, prefix_hits = 0;  // prompt tokens looked up / found (vLLM's counters)
};

class CacheManager {
 public:
  explicit CacheManager(const CacheGeometry& geometry);
  ~CacheManager();
  CacheManager(const CacheManager&) = delete;
  CacheManager& operator=(const CacheManager&) = delete;

  const CacheGeometry& geometry() const { return geometry_; }
  const std::vector<CacheSpec>& specs() const { return geometry_.specs; }  // per layer, with the pool's KV dtype
  const BlockLayout& layout() const { return geometry_.layout; }
  // Per block group: the blocks sequences hold now (shared ones once; not the prefix cache's unused ones).
  std::vector<int64_t> blocks_in_use() const;
  const PoolOptions& options() const { return options_; }
  int64_t block_tokens() const { return options_.block_tokens; }
  bool has_paged() const { return geometry_.block_bytes > 0; }
  bool has_state() const { return geometry_.slot_bytes > 0; }
  PoolStats stats() const;
  int64_t snapshot_interval_tokens() const { return geometry_.snapshot_blocks * options_.block_tokens; }

  // A new, empty sequence with a zeroed state slot. PoolExhausted when every state slot is taken.
  std::unique_ptr<Sequence> new_sequence();
  // A sequence that shares `parent`'s blocks (copy on write) and starts from a copy of its state.
  std::unique_ptr<Sequence> fork(const Sequence& parent);

  // Blocks that reserve() would take for these sequences to grow by these many tokens.
  int64_t blocks_needed(std::span<Sequence* const> seqs, std::span<const int64_t> new_tokens) const;
  // The most blocks `n` sequences hold at once when each grows to `tokens` tokens, in forward calls of at most
  // `step` new tokens, sharing the full blocks of their first `shared` tokens (a request's samples after its
  // prompt): every block for a full-attention group, the window's (plus rollback room and one step) for a
  // windowed one. Admission control's bound for a request that could never fit.
  int64_t blocks_at_most(int64_t shared, int64_t tokens, int64_t n, int64_t step) const;
  // Makes room for every sequence to grow by its count (new blocks, and private copies of shared partial
  // blocks about to be written). All or nothing: PoolExhausted, naming what was needed, changes nothing.
  void reserve(std::span<Sequence* const> seqs, std::span<const int64_t> new_tokens);
  // After a forward call wrote these tokens: extends the sequence, registers its newly filled blocks in the
  // prefix cache, and snapshots its state when its length reached a snapshot boundary.
  void advance(Sequence& seq, std::span<const int32_t> tokens);
  // Drops a sequence back to `length` tokens (must be a length it had); its state must be restored by the caller.
  void truncate_blocks(Sequence& seq, int64_t length);
  // Speculative decoding's rollback. checkpoint() remembers the sequence's current length and, on a model with
  // state layers, a copy of its recurrent state in a slot of its own (a free running slot, else a prefix
  // snapshot slot, evicting the oldest; PoolExhausted when neither is left). rollback() wants the sequence back
  // at `length` tokens: on a model without state layers it truncates there (blocks past it released); with state
  // layers it restores the latest checkpoint at or below `length` (dropping later ones) and truncates to that
  // checkpoint's length. It returns the length the sequence now has; the caller recomputes the tokens from there
  // to `length` (Model::rollback does). ArgumentError for a length outside [0, length()], for a model with
  // state layers and no checkpoint at or below `length`, or when a sliding window already dropped a block the
  // shorter sequence needs (PoolOptions::max_rollback_tokens keeps them). checkpoint() leaves `keep_free_slots`
  // running slots free for the caller's own later use (a scheduler's pending forks): past them it takes a snapshot
  // slot or throws.
  void checkpoint(Sequence& seq, int64_t keep_free_slots = 0);
  int64_t rollback(Sequence& seq, int64_t length);
  // Raises PoolOptions::max_rollback_tokens to at least `tokens` (never lowers it: another user of the pool may
  // need the larger room). Blocks a sliding window already gave back stay gone: call it before sequences grow.
  void keep_rollback_tokens(int64_t tokens);
  int64_t max_rollback_tokens() const;
  void clear_checkpoints(Sequence& seq);
  // Back to an empty sequence: blocks released, state zeroed.
  void reset(Sequence& seq);

  // For an empty sequence about to prefill `prompt`: attaches the longest cached prefix (whole blocks, at most
  // prompt.size() - 1 tokens so one token is left to compute; on models with state layers only up to a boundary
  // that has a state snapshot), restores its state, and returns the tokens reused.
  int64_t attach_cached_prefix(Sequence& seq, std::span<const int32_t> prompt);
  void clear_prefix_cache();

  // Performs the queued memory moves on `storage` (the one built from this manager's geometry), in order, and
  // empties the queue. Thread-safe: when it returns, every move queued before the call has been performed.
  void flush(CacheStorage& storage);
  // The moves queued and not yet flushed (tests).
  std::vector<CacheOp> pending_ops() const;

  // The block tables and slot mapping of a batch, one set per block group (what the layers read), from the
  // sequences' current tables.
  void fill_batch_tables(std::span<Sequence* const> seqs, std::span<const int64_t> context_lens,
                         std::span<const int64_t> new_tokens, std::vector<BlockTables>& groups) const;

 private:
  friend class Sequence;
  void release(Sequence& seq);
  // Queue memory moves (mu_ held).
  void copy_block(int32_t from, int32_t to) { ops_.push_back({CacheOp::Kind::copy_block, from, to}); }
  void copy_state(int32_t from, int32_t to) { ops_.push_back({CacheOp::Kind::copy_state, from, to}); }
  void zero_state(int32_t slot) { ops_.push_back({CacheOp::Kind::zero_state, -1, slot}); }
  // Only a block this sequence alone holds, and that the prefix cache does not vouch for, may be written.
  bool writable(int32_t block) const;
  int64_t blocks_needed_locked(std::span<Sequence* const> seqs, std::span<const int64_t> new_tokens) const;
  int32_t allocate_locked(size_t group);  // a block reserve() already counted
  void drop_outside_window(Sequence& seq);
  // The first block a windowed group needs for its next query at position `length` (blocks before it may be
  // given back): the window of keys, plus `keep` more tokens.
  int64_t first_needed_block(size_t group, int64_t length, int64_t keep) const;
  void release_checkpoints_locked(Sequence& seq, size_t keep);
  int32_t take_checkpoint_slot_locked(int64_t keep_free_slots);
  std::optional<int32_t> take_snapshot_slot();

  // The block groups (geometry_.layout); a windowed group gives back the blocks that left its window as a sequence
  // grows (its table keeps kDropped there), so its memory stays bounded.
  CacheGeometry geometry_;
  PoolOptions options_;
  size_t tables_ = 1;  // block tables per sequence: one per group, at least one
  static constexpr int32_t kDropped = -1;
  std::vector<int32_t> block_group_;  // per block id: the group it was last handed to
  BlockPool blocks_{0};
  int64_t num_slots_ = 0, running_slots_ = 0;
  std::vector<int32_t> free_slots_;  // running-sequence slots
  // Snapshots: block-chain hash of the prefix they follow -> slot (>= running_slots_), least recently used first.
  struct Snapshot {
    uint64_t key;
    int32_t slot;
  };
  std::list<Snapshot> snapshot_lru_;
  std::unordered_map<uint64_t, std::list<Snapshot>::iterator> snapshots_;
  std::vector<int32_t> free_snapshot_slots_;
  int64_t prefix_queries_ = 0, prefix_hits_ = 0;
  std::vector<CacheOp> ops_;  // decided, not yet performed
  // Bookkeeping only: sequences on different threads run forward calls at once, each writing its own blocks.
  mutable std::mutex mu_;
};

}  // namespace attnzoo
