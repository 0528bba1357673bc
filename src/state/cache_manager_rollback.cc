// Speculative decoding's side of the pool: checkpoints of a sequence's recurrent state (copied into slots of their
// own) and rollback to the latest one at or below a wanted length, with the blocks past it given back.
#include <algorithm>
#include <string>

#include "core/error.h"
#include "state/cache_manager.h"

namespace attnzoo {

int32_t CacheManager::take_checkpoint_slot_locked(int64_t keep_free_slots) {
  if (int64_t(free_slots_.size()) > keep_free_slots) {
    const int32_t slot = free_slots_.back();
    free_slots_.pop_back();
    return slot;
  }
  if (const auto slot = take_snapshot_slot()) return *slot;
  throw PoolExhausted("max_num_seqs: no recurrent-state slot is free for a speculative-decoding checkpoint (raise "
                      "max_num_seqs)");
}

void CacheManager::release_checkpoints_locked(Sequence& seq, size_t keep) {
  while (seq.checkpoints_.size() > keep) {
    const int32_t slot = seq.checkpoints_.back().slot;
    if (slot >= 0) (slot < running_slots_ ? free_slots_ : free_snapshot_slots_).push_back(slot);
    seq.checkpoints_.pop_back();
  }
}

void CacheManager::checkpoint(Sequence& seq, int64_t keep_free_slots) {
  std::lock_guard lock(mu_);
  auto& cps = seq.checkpoints_;
  // Lengths only grow between rollbacks; one at the same length is refreshed in place.
  while (!cps.empty() && cps.back().length >= seq.length_) release_checkpoints_locked(seq, cps.size() - 1);
  int32_t slot = -1;
  if (has_state()) {
    slot = take_checkpoint_slot_locked(keep_free_slots);
    copy_state(seq.state_slot_, slot);
  }
  cps.push_back({seq.length_, slot});
}

void CacheManager::keep_rollback_tokens(int64_t tokens) {
  std::lock_guard lock(mu_);
  options_.max_rollback_tokens = std::max(options_.max_rollback_tokens, tokens);
}

int64_t CacheManager::max_rollback_tokens() const {
  std::lock_guard lock(mu_);
  return options_.max_rollback_tokens;
}

void CacheManager::clear_checkpoints(Sequence& seq) {
  std::lock_guard lock(mu_);
  release_checkpoints_locked(seq, 0);
}

int64_t CacheManager::rollback(Sequence& seq, int64_t length) {
  int64_t state_at = length;
  {
    std::lock_guard lock(mu_);
    require(length >= 0 && length <= seq.length_, "length",
            "must be in [0, " + std::to_string(seq.length_) + "], got " + std::to_string(length));
    auto& cps = seq.checkpoints_;
    size_t keep = cps.size();
    while (keep > 0 && cps[keep - 1].length > length) --keep;
    const bool restore = has_state() && length > 0 && length < seq.length_;
    if (restore) {
      require(keep > 0, "length", "this sequence has recurrent state and no checkpoint at or below " +
                                      std::to_string(length) + " to roll back to");
      state_at = cps[keep - 1].length;
    }
    // Checked before anything changes, and at the length the sequence really returns to: recomputing from a
    // checkpoint below `length` needs that checkpoint's window of keys, not `length`'s.
    for (size_t g = 0; g < geometry_.layout.groups.size() && state_at > 0; ++g) {
      if (geometry_.layout.groups[g].window <= 0) continue;
      const auto& table = seq.block_tables_[g];
      const int64_t first = first_needed_block(g, state_at, 0);
      require(first >= int64_t(table.size()) || table[size_t(first)] != kDropped, "length",
              "rolls back past blocks the sliding window already gave back (set max_rollback_tokens)");
    }
    release_checkpoints_locked(seq, keep);
    if (has_state() && length == 0) {
      zero_state(seq.state_slot_);  // the empty sequence's state needs no checkpoint
    } else if (restore) {
      copy_state(cps.back().slot, seq.state_slot_);
    }
  }
  truncate_blocks(seq, state_at);
  return state_at;
}

}  // namespace attnzoo
