#include "state/block_pool.h"

#include <algorithm>
#include <random>

#include "core/error.h"

namespace attnzoo {
namespace {

// splitmix64's finaliser: cheap, and every input bit reaches every output bit.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

BlockKey make_block_key(uint64_t parent, std::span<const int32_t> tokens) {
  BlockKey k;
  k.parent = parent;
  k.tokens.assign(tokens.begin(), tokens.end());
  uint64_t h = mix(parent ^ 0x6a09e667f3bcc908ull);
  for (int32_t t : tokens) h = mix(h ^ uint64_t(uint32_t(t)));
  k.hash = mix(h ^ uint64_t(tokens.size()));
  return k;
}

BlockPool::BlockPool(int64_t num_blocks, uint64_t shuffle_seed) {
  require(num_blocks >= 0 && num_blocks < (int64_t(1) << 31), "num_blocks", "must be in [0, 2^31)");
  ref_.assign(size_t(num_blocks), 0);
  evictable_pos_.resize(size_t(num_blocks));
  evictable_in_.assign(size_t(num_blocks), 0);
  key_of_.resize(size_t(num_blocks));
  free_.reserve(size_t(num_blocks));
  // Handing out low ids first keeps a lightly used pool's memory compact.
  for (int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(int32_t(b));
  if (shuffle_seed != 0) std::shuffle(free_.begin(), free_.end(), std::mt19937_64(shuffle_seed));
}

std::optional<int32_t> BlockPool::allocate() {
  int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (!evict_first_.empty() || !evictable_.empty()) {
    b = (evict_first_.empty() ? evictable_ : evict_first_).front();
    evict(b);
  } else {
    return std::nullopt;
  }
  ref_[size_t(b)] = 1;
  return b;
}

void BlockPool::evict(int32_t b) {
  evictable_list(evictable_in_[size_t(b)]).erase(evictable_pos_[size_t(b)]);
  evictable_in_[size_t(b)] = 0;
  const BlockKey& key = *key_of_[size_t(b)];
  auto [lo, hi] = cached_.equal_range(key.hash);
  for (auto it = lo; it != hi; ++it)
    if (it->second == b) {
      cached_.erase(it);
      break;
    }
  key_of_[size_t(b)].reset();
}

void BlockPool::retain(int32_t b) {
  if (ref_[size_t(b)]++ == 0 && evictable_in_[size_t(b)]) {
    evictable_list(evictable_in_[size_t(b)]).erase(evictable_pos_[size_t(b)]);
    evictable_in_[size_t(b)] = 0;
  }
}

void BlockPool::release(int32_t b, bool evict_first) {
  if (--ref_[size_t(b)] > 0) return;
  if (key_of_[size_t(b)]) {
    evictable_in_[size_t(b)] = evict_first ? 2 : 1;
    std::list<int32_t>& list = evictable_list(evictable_in_[size_t(b)]);
    list.push_back(b);
    evictable_pos_[size_t(b)] = std::prev(list.end());
  } else {
    free_.push_back(b);
  }
}

std::optional<int32_t> BlockPool::lookup(const BlockKey& key) {
  auto [lo, hi] = cached_.equal_range(key.hash);
  for (auto it = lo; it != hi; ++it)
    if (*key_of_[size_t(it->second)] == key) {
      retain(it->second);
      return it->second;
    }
  return std::nullopt;
}

bool BlockPool::contains(const BlockKey& key) const {
  auto [lo, hi] = cached_.equal_range(key.hash);
  for (auto it = lo; it != hi; ++it)
    if (*key_of_[size_t(it->second)] == key) return true;
  return false;
}

void BlockPool::register_block(int32_t b, BlockKey key) {
  if (key_of_[size_t(b)] || contains(key)) return;
  cached_.emplace(key.hash, b);
  key_of_[size_t(b)] = std::move(key);
}

void BlockPool::unregister(int32_t b) {
  if (!key_of_[size_t(b)]) return;
  require(ref_[size_t(b)] > 0, "block", "only a referenced block is unregistered (an unreferenced one is evicted)");
  auto [lo, hi] = cached_.equal_range(key_of_[size_t(b)]->hash);
  for (auto it = lo; it != hi; ++it)
    if (it->second == b) {
      cached_.erase(it);
      break;
    }
  key_of_[size_t(b)].reset();
}

void BlockPool::clear_cache() {
  while (!evict_first_.empty() || !evictable_.empty()) {
    const int32_t b = (evict_first_.empty() ? evictable_ : evict_first_).front();
    evict(b);
    free_.push_back(b);
  }
}

}  // namespace attnzoo
