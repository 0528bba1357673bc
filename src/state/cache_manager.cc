#include "state/cache_manager.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace attnzoo {

Sequence::~Sequence() {
  if (manager_) manager_->release(*this);
}

int64_t Sequence::bytes() const {
  int64_t held = 0;
  for (const auto& table : block_tables_)
    held += std::count_if(table.begin(), table.end(), [](int32_t b) { return b >= 0; });
  const CacheGeometry& g = manager_->geometry();
  return held * g.block_bytes + (state_slot_ >= 0 ? g.slot_bytes : 0);
}

std::vector<int64_t> Sequence::checkpoint_lengths() const {
  std::vector<int64_t> out;
  for (const Checkpoint& c : checkpoints_) out.push_back(c.length);
  return out;
}

SequenceLease::SequenceLease(Sequence& s) : s_(s) {
  require(!s.busy_.exchange(true, std::memory_order_acquire), "sequences",
          "this sequence is being used by another thread (one sequence, one forward call at a time)");
}

SequencesLease::SequencesLease(std::span<Sequence* const> seqs) : seqs_(seqs) {
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (!seqs[i]->busy_.exchange(true, std::memory_order_acquire)) continue;
    for (size_t j = 0; j < i; ++j) seqs[j]->busy_.store(false, std::memory_order_release);
    throw ArgumentError("sequences: this sequence is being used by another thread (one sequence, one forward call "
                        "at a time)");
  }
}

SequencesLease::~SequencesLease() {
  for (Sequence* s : seqs_) s->busy_.store(false, std::memory_order_release);
}

CacheManager::CacheManager(const CacheGeometry& geometry) : geometry_(geometry), options_(geometry.options) {
  tables_ = std::max<size_t>(1, geometry_.layout.groups.size());
  num_slots_ = geometry_.num_slots();
  running_slots_ = geometry_.running_slots;
  blocks_ = BlockPool(geometry_.num_blocks, options_.shuffle_seed);
  block_group_.assign(size_t(geometry_.num_blocks), 0);
  for (int64_t i = running_slots_ - 1; i >= 0; --i) free_slots_.push_back(int32_t(i));
  for (int64_t i = num_slots_ - 1; i >= running_slots_; --i) free_snapshot_slots_.push_back(int32_t(i));
}

CacheManager::~CacheManager() = default;

void CacheManager::flush(CacheStorage& storage) {
  std::lock_guard lock(mu_);
  storage.apply(ops_);
  ops_.clear();
}

std::vector<CacheOp> CacheManager::pending_ops() const {
  std::lock_guard lock(mu_);
  return ops_;
}

PoolStats CacheManager::stats() const {
  std::lock_guard lock(mu_);
  PoolStats s;
  s.num_blocks = blocks_.num_blocks();
  s.free_blocks = blocks_.num_available();
  s.cached_blocks = blocks_.num_cached();
  s.block_bytes = geometry_.block_bytes;
  s.state_slots = running_slots_;
  s.free_state_slots = int64_t(free_slots_.size());
  s.snapshot_slots = num_slots_ - running_slots_;
  s.snapshots = int64_t(snapshots_.size());
  s.state_slot_bytes = geometry_.slot_bytes;
  s.bytes = geometry_.bytes();
  s.prefix_queries = prefix_queries_;
  s.prefix_hits = prefix_hits_;
  return s;
}

bool CacheManager::writable(int32_t block) const {
  return blocks_.ref_count(block) == 1 && !blocks_.is_cached(block);
}

std::unique_ptr<Sequence> CacheManager::new_sequence() {
  std::unique_ptr<Sequence> seq(new Sequence(this));
  seq->block_tables_.resize(tables_);
  std::lock_guard lock(mu_);
  if (has_state()) {
    if (free_slots_.empty())
      throw PoolExhausted("max_num_seqs: all " + std::to_string(running_slots_) +
                          " recurrent-state slots are in use (free a sequence or raise max_num_seqs)");
    seq->state_slot_ = free_slots_.back();
    free_slots_.pop_back();
    zero_state(seq->state_slot_);
  }
  return seq;
}

std::unique_ptr<Sequence> CacheManager::fork(const Sequence& parent) {
  require(parent.manager_ == this, "sequence", "belongs to another model's pool");
  std::unique_ptr<Sequence> seq(new Sequence(this));
  std::lock_guard lock(mu_);
  if (has_state()) {
    if (free_slots_.empty())
      throw PoolExhausted("max_num_seqs: all " + std::to_string(running_slots_) + " recurrent-state slots are in use");
    seq->state_slot_ = free_slots_.back();
    free_slots_.pop_back();
    copy_state(parent.state_slot_, seq->state_slot_);
  }
  seq->length_ = parent.length_;
  seq->tokens_ = parent.tokens_;
  seq->block_tables_ = parent.block_tables_;
  seq->block_hashes_ = parent.block_hashes_;
  for (const auto& table : seq->block_tables_)
    for (int32_t b : table)
      if (b != kDropped) blocks_.retain(b);
  return seq;
}

void CacheManager::release(Sequence& seq) {
  std::lock_guard lock(mu_);
  release_checkpoints_locked(seq, 0);
  for (auto& table : seq.block_tables_) {
    for (int32_t b : table)
      if (b != kDropped) blocks_.release(b);
    table.clear();
  }
  if (seq.state_slot_ >= 0) free_slots_.push_back(seq.state_slot_);
  seq.state_slot_ = -1;
}

int64_t CacheManager::blocks_needed(std::span<Sequence* const> seqs, std::span<const int64_t> new_tokens) const {
  std::lock_guard lock(mu_);
  return blocks_needed_locked(seqs, new_tokens);
}

int64_t CacheManager::blocks_needed_locked(std::span<Sequence* const> seqs, std::span<const int64_t> new_tokens) const {
  if (!has_paged()) return 0;
  const int64_t B = options_.block_tokens;
  int64_t need = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const Sequence& s = *seqs[i];
    const int64_t n = new_tokens[i];
    if (n <= 0) continue;
    for (const auto& table : s.block_tables_) {
      const int64_t have = int64_t(table.size());
      need += std::max<int64_t>(0, (s.length_ + n + B - 1) / B - have);
      // The partly filled last block is written next: if anyone else holds it, this sequence needs its own copy.
      if (s.length_ % B != 0 && have > 0 && !writable(table[size_t(s.length_ / B)])) ++need;
    }
  }
  return need;
}

int64_t CacheManager::blocks_at_most(int64_t shared, int64_t tokens, int64_t n, int64_t step) const {
  const int64_t B = options_.block_tokens, keep = max_rollback_tokens();
  int64_t need = 0;
  for (const BlockGroup& g : geometry_.layout.groups) {
    const int64_t common = std::min(shared, tokens) / B, own = (tokens + B - 1) / B - common;
    int64_t blocks = checked_add(common, checked_mul(n, own, "blocks"), "blocks");
    // At most the window, the rollback room and one step's tokens, plus the block the window starts inside.
    if (g.window > 0) blocks = std::min(blocks, checked_mul(n, (g.window + keep + step + B - 1) / B + 1, "blocks"));
    need = checked_add(need, blocks, "blocks");
  }
  return need;
}

int32_t CacheManager::allocate_locked(size_t group) {
  const int32_t b = *blocks_.allocate();
  block_group_[size_t(b)] = int32_t(group);
  return b;
}

std::vector<int64_t> CacheManager::blocks_in_use() const {
  std::lock_guard lock(mu_);
  std::vector<int64_t> used(geometry_.layout.groups.size(), 0);
  for (int32_t b = 0; b < int32_t(blocks_.num_blocks()); ++b)
    if (blocks_.ref_count(b) > 0) ++used[size_t(block_group_[size_t(b)])];
  return used;
}

void CacheManager::reserve(std::span<Sequence* const> seqs, std::span<const int64_t> new_tokens) {
  std::lock_guard lock(mu_);
  const int64_t need = blocks_needed_locked(seqs, new_tokens);
  if (need > blocks_.num_available())
    throw PoolExhausted("kv cache: this step needs " + std::to_string(need) + " blocks of " +
                        std::to_string(options_.block_tokens) + " tokens, " + std::to_string(blocks_.num_available()) +
                        " of " + std::to_string(blocks_.num_blocks()) + " are free (nothing was written)");
  if (!has_paged()) return;
  const int64_t B = options_.block_tokens;
  for (size_t i = 0; i < seqs.size(); ++i) {
    Sequence& s = *seqs[i];
    if (new_tokens[i] <= 0) continue;
    for (size_t g = 0; g < geometry_.layout.groups.size(); ++g) {
      std::vector<int32_t>& table = s.block_tables_[g];
      if (s.length_ % B != 0) {
        int32_t& last = table[size_t(s.length_ / B)];
        if (!writable(last)) {
          const int32_t own = allocate_locked(g);
          copy_block(last, own);
          blocks_.release(last);
          last = own;
        }
      }
      while (int64_t(table.size()) * B < s.length_ + new_tokens[i]) table.push_back(allocate_locked(g));
    }
  }
}

std::optional<int32_t> CacheManager::take_snapshot_slot() {
  if (!free_snapshot_slots_.empty()) {
    const int32_t slot = free_snapshot_slots_.back();
    free_snapshot_slots_.pop_back();
    return slot;
  }
  if (snapshot_lru_.empty()) return std::nullopt;
  const Snapshot oldest = snapshot_lru_.front();
  snapshot_lru_.pop_front();
  snapshots_.erase(oldest.key);
  return oldest.slot;
}

void CacheManager::advance(Sequence& seq, std::span<const int32_t> tokens) {
  std::lock_guard lock(mu_);
  const int64_t B = options_.block_tokens;
  seq.tokens_.insert(seq.tokens_.end(), tokens.begin(), tokens.end());
  seq.length_ += int64_t(tokens.size());
  while (int64_t(seq.block_hashes_.size()) < seq.length_ / B) {
    const size_t b = seq.block_hashes_.size();
    const uint64_t parent = b == 0 ? 0 : seq.block_hashes_[b - 1];
    BlockKey key = make_block_key(parent, std::span(seq.tokens_).subspan(b * size_t(B), size_t(B)));
    seq.block_hashes_.push_back(key.hash);
    if (!options_.prefix_caching) continue;
    for (size_t g = 0; g < geometry_.layout.groups.size(); ++g) {
      key.group = int32_t(g);
      if (seq.block_tables_[g][b] != kDropped) blocks_.register_block(seq.block_tables_[g][b], key);
    }
  }
  drop_outside_window(seq);
  const int64_t interval = snapshot_interval_tokens();
  if (!options_.prefix_caching || !has_state() || seq.length_ == 0 || seq.length_ % interval != 0) return;
  const uint64_t key = seq.block_hashes_.back();
  if (auto it = snapshots_.find(key); it != snapshots_.end()) {
    snapshot_lru_.splice(snapshot_lru_.end(), snapshot_lru_, it->second);
    return;
  }
  const auto slot = take_snapshot_slot();
  if (!slot) return;  // a cache: no room means no snapshot, never an error
  copy_state(seq.state_slot_, *slot);
  snapshot_lru_.push_back({key, *slot});
  snapshots_[key] = std::prev(snapshot_lru_.end());
}

int64_t CacheManager::first_needed_block(size_t group, int64_t length, int64_t keep) const {
  // The next query sits at position `length` and sees keys from length - window + 1 on.
  return std::max<int64_t>(0, length - geometry_.layout.groups[group].window - keep) / options_.block_tokens;
}

void CacheManager::drop_outside_window(Sequence& seq) {
  for (size_t g = 0; g < geometry_.layout.groups.size(); ++g) {
    if (geometry_.layout.groups[g].window <= 0) continue;
    std::vector<int32_t>& table = seq.block_tables_[g];
    const int64_t dead = std::min<int64_t>(first_needed_block(g, seq.length_, options_.max_rollback_tokens),
                                           int64_t(table.size()));
    // A table's given-back blocks are a prefix of it: only those after it are still to give back, oldest first.
    int64_t b = dead;
    while (b > 0 && table[size_t(b - 1)] != kDropped) --b;
    for (; b < dead; ++b) {
      blocks_.release(table[size_t(b)], /*evict_first=*/true);
      table[size_t(b)] = kDropped;
    }
  }
}

void CacheManager::truncate_blocks(Sequence& seq, int64_t length) {
  std::lock_guard lock(mu_);
  require(length >= 0 && length <= seq.length_, "length",
          "must be in [0, " + std::to_string(seq.length_) + "], got " + std::to_string(length));
  const int64_t B = options_.block_tokens;
  const size_t keep = size_t((length + B - 1) / B);
  for (auto& table : seq.block_tables_) {
    while (table.size() > keep) {
      if (table.back() != kDropped) blocks_.release(table.back());
      table.pop_back();
    }
    // A rollback into a block that filled up (and was registered in the prefix cache) during the pass now undone:
    // held by nobody else, it leaves the cache rather than be copied before its tail is rewritten; the copy would
    // need a free block, which a recompute inside a verification (planned without it) may not find.
    if (length % B != 0 && !table.empty() && table.back() != kDropped && blocks_.ref_count(table.back()) == 1)
      blocks_.unregister(table.back());
  }
  seq.tokens_.resize(size_t(length));
  seq.block_hashes_.resize(size_t(length / B));
  seq.length_ = length;
}

void CacheManager::reset(Sequence& seq) {
  truncate_blocks(seq, 0);
  std::lock_guard lock(mu_);
  release_checkpoints_locked(seq, 0);
  seq.cached_tokens_ = 0;
  if (seq.state_slot_ >= 0) zero_state(seq.state_slot_);
}

void CacheManager::fill_batch_tables(std::span<Sequence* const> seqs, std::span<const int64_t> context_lens,
                                   std::span<const int64_t> new_tokens, std::vector<BlockTables>& groups) const {
  const int64_t B = options_.block_tokens;
  groups.resize(geometry_.layout.groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    BlockTables& out = groups[g];
    out.max_blocks = 0;
    for (Sequence* s : seqs) out.max_blocks = std::max<int64_t>(out.max_blocks, int64_t(s->block_tables_[g].size()));
    out.block_tables.assign(seqs.size() * size_t(out.max_blocks), 0);
    out.slot_mapping.clear();
    for (size_t i = 0; i < seqs.size(); ++i) {
      const auto& table = seqs[i]->block_tables_[g];
      // A given-back block is outside the window: the kernels never read it, any valid id stands in.
      for (size_t b = 0; b < table.size(); ++b)
        out.block_tables[i * size_t(out.max_blocks) + b] = table[b] == kDropped ? 0 : table[b];
      for (int64_t t = context_lens[i]; t < context_lens[i] + new_tokens[i]; ++t)
        out.slot_mapping.push_back(int64_t(table[size_t(t / B)]) * B + t % B);
    }
  }
}

}  // namespace attnzoo
