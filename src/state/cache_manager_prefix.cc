// The pool's prefix cache from a new sequence's side: the longest cached prefix of its prompt that every block
// group (and, on models with state layers, a state snapshot) can restore, attached without computing it.
#include <string>

#include "core/error.h"
#include "state/cache_manager.h"

namespace attnzoo {

int64_t CacheManager::attach_cached_prefix(Sequence& seq, std::span<const int32_t> prompt) {
  std::lock_guard lock(mu_);
  require(seq.length_ == 0, "sequence", "a cached prefix can only start an empty sequence");
  prefix_queries_ += int64_t(prompt.size());
  if (!options_.prefix_caching || prompt.size() < 2) return 0;
  const int64_t B = options_.block_tokens;
  const int64_t max_blocks = (int64_t(prompt.size()) - 1) / B;
  const size_t G = geometry_.layout.groups.size();
  std::vector<BlockKey> keys;
  auto key = [&](size_t g, int64_t b) -> const BlockKey& {
    keys[size_t(b)].group = int32_t(g);
    return keys[size_t(b)];
  };
  // Full-attention groups need every block of the prefix: it ends where one of them misses a block.
  for (int64_t b = 0; b < max_blocks; ++b) {
    keys.push_back(make_block_key(b == 0 ? 0 : keys.back().hash, prompt.subspan(size_t(b * B), size_t(B))));
    bool all = true;
    for (size_t g = 0; g < G && all; ++g) all = geometry_.layout.groups[g].window > 0 || blocks_.contains(key(g, b));
    if (!all) {
      keys.pop_back();
      break;
    }
  }
  // A windowed group needs only the blocks of its window before the prefix's end (vLLM's sliding-window hit, found
  // from the right): per group, how many cached blocks end at each block.
  std::vector<std::vector<int64_t>> run(G);
  for (size_t g = 0; g < G; ++g) {
    if (geometry_.layout.groups[g].window <= 0) continue;
    run[g].resize(keys.size());
    for (int64_t b = 0; b < int64_t(keys.size()); ++b)
      run[g][size_t(b)] = blocks_.contains(key(g, b)) ? (b > 0 ? run[g][size_t(b - 1)] : 0) + 1 : 0;
  }
  auto windows_hold = [&](int64_t hit) {
    for (size_t g = 0; g < G; ++g)
      if (geometry_.layout.groups[g].window > 0 && run[g][size_t(hit - 1)] < hit - first_needed_block(g, hit * B, 0))
        return false;
    return true;
  };
  int64_t hit = int64_t(keys.size());
  int32_t snapshot_slot = -1;
  for (; hit > 0; --hit) {
    if (!windows_hold(hit)) continue;
    if (!has_state()) break;
    // The recurrent state must be known exactly where the reused prefix ends: take the longest snapshot.
    if (hit % geometry_.snapshot_blocks != 0) continue;
    auto it = snapshots_.find(keys[size_t(hit - 1)].hash);
    if (it == snapshots_.end()) continue;
    snapshot_slot = it->second->slot;
    snapshot_lru_.splice(snapshot_lru_.end(), snapshot_lru_, it->second);
    break;
  }
  if (hit == 0) return 0;
  for (size_t g = 0; g < G; ++g) {
    const int64_t first = geometry_.layout.groups[g].window > 0 ? first_needed_block(g, hit * B, 0) : 0;
    for (int64_t b = 0; b < hit; ++b) seq.block_tables_[g].push_back(b < first ? kDropped : *blocks_.lookup(key(g, b)));
  }
  for (int64_t b = 0; b < hit; ++b) seq.block_hashes_.push_back(keys[size_t(b)].hash);
  if (snapshot_slot >= 0) copy_state(snapshot_slot, seq.state_slot_);
  seq.length_ = hit * B;
  seq.cached_tokens_ = seq.length_;
  seq.tokens_.assign(prompt.begin(), prompt.begin() + seq.length_);
  prefix_hits_ += seq.length_;
  return seq.length_;
}

void CacheManager::clear_prefix_cache() {
  std::lock_guard lock(mu_);
  blocks_.clear_cache();
  for (const Snapshot& s : snapshot_lru_) free_snapshot_slots_.push_back(s.slot);
  snapshot_lru_.clear();
  snapshots_.clear();
}

}  // namespace attnzoo
