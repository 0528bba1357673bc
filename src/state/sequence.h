#pragma once
// One sequence's place in the memory pool: its block tables (which pool blocks hold its tokens' K/V, in token
// order, one table per block group of the pool), its recurrent-state slot, the tokens it has seen (for
// prefix-cache hashes) and the chain hash of each of its full blocks. Made by CacheManager::new_sequence() /
// fork(); the destructor returns everything to the manager.
// A Sequence must not be used by two threads at once: `busy` turns such a use into an error instead of a torn
// cache (Model::forward takes it for the duration of the call).
#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

namespace attnzoo {

class CacheManager;

class Sequence {
 public:
  ~Sequence();
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;

  int64_t length() const { return length_; }  // tokens whose K/V and state are in the pool
  const std::vector<int32_t>& tokens() const { return tokens_; }
  // Block group 0's table (every paged layer's unless the pool splits windowed layers into groups of their own:
  // CacheManager::layout()); -1 marks a block a sliding window gave back.
  const std::vector<int32_t>& block_table() const { return block_tables_[0]; }
  const std::vector<std::vector<int32_t>>& block_tables() const { return block_tables_; }
  int32_t state_slot() const { return state_slot_; }
  const CacheManager* manager() const { return manager_; }
  // Tokens this sequence took from the prefix cache instead of computing them.
  int64_t cached_tokens() const { return cached_tokens_; }
  // Lengths this sequence can roll back to without recomputing (CacheManager::checkpoint), ascending.
  std::vector<int64_t> checkpoint_lengths() const;
  int64_t bytes() const;  // pool memory it references (blocks it holds, shared or not, and its state slot)

 private:
  friend class CacheManager;
  explicit Sequence(CacheManager* manager) : manager_(manager) {}
  CacheManager* manager_;
  int64_t length_ = 0, cached_tokens_ = 0;
  std::vector<int32_t> tokens_;
  std::vector<std::vector<int32_t>> block_tables_;  // one per block group, at least one
  std::vector<uint64_t> block_hashes_;  // chain hash of each full block, in order
  int32_t state_slot_ = -1;
  // Rollback points (CacheManager::checkpoint): a length and, on models with state layers, the slot holding a copy
  // of the state at that length (-1 otherwise); ascending lengths.
  struct Checkpoint {
    int64_t length;
    int32_t slot;
  };
  std::vector<Checkpoint> checkpoints_;
  std::atomic<bool> busy_{false};
  friend class SequenceLease;
  friend class SequencesLease;
};

// Marks a sequence busy for a scope; throws ArgumentError("sequences: ... used by another thread") if it is.
class SequenceLease {
 public:
  explicit SequenceLease(Sequence& s);
  ~SequenceLease() { s_.busy_.store(false, std::memory_order_release); }
  SequenceLease(const SequenceLease&) = delete;
  SequenceLease& operator=(const SequenceLease&) = delete;

 private:
  Sequence& s_;
};

// SequenceLease on every sequence of a batch at once, without a heap object each (a decode step allocates
// nothing): either all are marked busy or, when one already is, none (same ArgumentError). `seqs` must outlive it.
class SequencesLease {
 public:
  explicit SequencesLease(std::span<Sequence* const> seqs);
  ~SequencesLease();
  SequencesLease(const SequencesLease&) = delete;
  SequencesLease& operator=(const SequencesLease&) = delete;

 private:
  std::span<Sequence* const> seqs_;
};

}  // namespace attnzoo
