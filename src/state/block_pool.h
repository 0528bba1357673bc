#pragma once
// The pool's block bookkeeping, without the memory itself: a fixed number of block ids, each with a reference
// count; free blocks; and the prefix cache (vLLM's automatic prefix caching): a full block can be registered
// under the hash chain of its tokens, so a later sequence whose prompt starts with the same tokens takes the
// block instead of recomputing it. A cached block whose last reference goes away stays cached (evictable, least
// recently used first) until a fresh block is needed and no never-used one is left. A cached block a sliding
// window gave back mid-sequence goes before any of those: it serves only a prompt that ends near it.
#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace attnzoo {

// The identity of a full block: its tokens and the hash of every block before it, and the block group whose layers
// it holds (CacheManager: each group caches its own copy of a prefix). `hash` is a digest of the tokens and parent;
// lookups compare the whole key, so a digest collision can never hand out the wrong block.
struct BlockKey {
  uint64_t parent = 0, hash = 0;
  std::vector<int32_t> tokens;
  int32_t group = 0;
  bool operator==(const BlockKey& o) const {
    return hash == o.hash && group == o.group && parent == o.parent && tokens == o.tokens;
  }
};

// The chain hash of a block of tokens after a block whose hash was `parent` (0 for the first block).
BlockKey make_block_key(uint64_t parent, std::span<const int32_t> tokens);

class BlockPool {
 public:
  // shuffle_seed != 0: free blocks are handed out in a shuffled order (tests of layers that must not assume
  // adjacent blocks).
  explicit BlockPool(int64_t num_blocks, uint64_t shuffle_seed = 0);

  int64_t num_blocks() const { return int64_t(ref_.size()); }
  // Blocks an allocate() can still hand out: never-used or released ones plus evictable cached ones.
  int64_t num_available() const { return int64_t(free_.size() + evictable_.size() + evict_first_.size()); }
  int64_t num_cached() const { return int64_t(cached_.size()); }

  // A block with reference count 1, or nullopt when none is left. Evicts the least recently used cached block
  // when no plain free block remains.
  std::optional<int32_t> allocate();
  void retain(int32_t block);
  // Drops one reference; at zero the block becomes free, or evictable if it is cached: after every other
  // evictable block, or with `evict_first` (a block a sliding window left behind) before all of them.
  void release(int32_t block, bool evict_first = false);
  int32_t ref_count(int32_t block) const { return ref_[size_t(block)]; }
  // A cached block is immutable: its contents are what its key says.
  bool is_cached(int32_t block) const { return key_of_[size_t(block)].has_value(); }

  // The cached block for `key` (its reference count raised), or nullopt.
  std::optional<int32_t> lookup(const BlockKey& key);
  // Whether `key` is cached, without touching it.
  bool contains(const BlockKey& key) const;
  // Registers a full block under `key`. A key that is already cached keeps its block (the new one stays an
  // ordinary block); a block is registered at most once.
  void register_block(int32_t block, BlockKey key);
  // Forgets a referenced block's key (a no-op when it has none): its holder is about to rewrite it, and a later
  // lookup must not find contents that no longer match.
  void unregister(int32_t block);
  // Forgets every cached block that nobody references (they become plain free blocks).
  void clear_cache();

 private:
  void evict(int32_t block);
  std::vector<int32_t> ref_;
  std::vector<int32_t> free_;  // stack of never-cached free blocks
  // Cached blocks with no reference, least recently released first, those released with evict_first in a list of
  // their own that is emptied first; each such block's list and position in it.
  std::list<int32_t> evictable_, evict_first_;
  std::vector<std::list<int32_t>::iterator> evictable_pos_;
  std::vector<uint8_t> evictable_in_;  // 0: in neither, 1: evictable_, 2: evict_first_
  std::list<int32_t>& evictable_list(uint8_t in) { return in == 2 ? evict_first_ : evictable_; }
  std::unordered_multimap<uint64_t, int32_t> cached_;  // key hash -> block
  std::vector<std::optional<BlockKey>> key_of_;         // block -> its key when cached
};

}  // namespace attnzoo
