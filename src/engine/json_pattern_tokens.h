#pragma once
// Structured outputs' mask inside a patterned string (a `pattern`, or a format's DFA: engine/json_string_pattern.h)
// without walking the vocabulary trie each step. Within such a string the recognizer's state that decides a
// token's bytes is the DFA state alone (plus the characters so far, when minLength / maxLength intersect it), up to
// the string's closing quote: so per (DFA, state) the tokens with no quote whose bytes all move the DFA are found
// once, each with the state it ends in and its characters, grouped by those two. A step then sets the groups'
// flags (with a length bound: the groups whose end state can still finish within it, one StringLengths::viable
// per group, which suffices: a prefix of a viable string is viable) and walks only the tokens that hold a quote.
// The sets are built on first use and kept while their DFA lives, at most kMaxBytes per vocabulary in all; past
// that a state is walked as before.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/json_string_pattern.h"

namespace attnzoo {

// The quote-free tokens one DFA state takes, grouped by (end state, characters).
struct PatternTokenSet {
  struct Group {
    uint16_t end;    // the DFA state after the token
    uint32_t chars;  // the token's characters (UTF-8 lead and ASCII bytes)
    uint32_t stop;   // the group's ids are ids[previous group's stop, stop)
  };
  std::vector<int32_t> ids;  // ascending within each group
  std::vector<Group> groups;
  size_t bytes() const { return sizeof(*this) + ids.capacity() * sizeof(int32_t) + groups.capacity() * sizeof(Group); }
};

// One token the set's build met: its id, end state and characters (what TokenTrie's DFA walk yields).
struct PatternTokenHit {
  uint16_t end;
  uint32_t chars;
  int32_t id;
};

// The set of `hits`, sorted into groups (hits is reordered).
PatternTokenSet group_pattern_tokens(std::vector<PatternTokenHit>& hits);

class PatternTokenCache {
 public:
  // 64 MiB: SmolLM2's broad `^[A-Za-z ]+$` takes ~25,000 tokens (100 KB) a state, so some 600 such states.
  static constexpr size_t kMaxBytes = size_t(64) << 20;
  explicit PatternTokenCache(size_t max_bytes = kMaxBytes) : max_bytes_(max_bytes) {}

  // The set of `pattern`'s `state`, from build() on first use; null when keeping it would pass the cap after
  // dropping the sets of DFAs no longer alive. build() runs outside the cache's lock: a broad pattern's state takes
  // milliseconds (a walk of the whole vocabulary trie), and other requests' steps look up their own sets meanwhile.
  // Two callers may build one state at once; the first to finish keeps its set, the other's (the same) is dropped.
  template <class Build>
  std::shared_ptr<const PatternTokenSet> get(const std::shared_ptr<const StringPattern>& pattern, uint16_t state,
                                             Build&& build) {
    {
      std::lock_guard lock(mutex_);
      if (const Entry* e = find(pattern); e && e->sets[state]) return e->sets[state];
    }
    auto set = std::make_shared<const PatternTokenSet>(build());
    std::lock_guard lock(mutex_);
    if (const Entry* e = find(pattern); e && e->sets[state]) return e->sets[state];
    if (!fits(set->bytes())) return nullptr;
    bytes_ += set->bytes();
    return slot_for(pattern, state) = std::move(set);
  }
  size_t bytes() const {
    std::lock_guard lock(mutex_);
    return bytes_;
  }

 private:
  struct Entry {
    std::weak_ptr<const StringPattern> pattern;  // the DFA's owner: expired once no schema holds it
    const StringPattern* key;                    // its address, unique while it lives
    std::vector<std::shared_ptr<const PatternTokenSet>> sets;  // by state
  };
  Entry* find(const std::shared_ptr<const StringPattern>& pattern);
  // Makes the DFA's entry when it has none (dropping those of expired DFAs then).
  std::shared_ptr<const PatternTokenSet>& slot_for(const std::shared_ptr<const StringPattern>& pattern,
                                                   uint16_t state);
  void drop_expired();
  bool fits(size_t more);  // drops expired entries when needed

  mutable std::mutex mutex_;
  std::vector<Entry> entries_;
  size_t max_bytes_;
  size_t bytes_ = 0;
};

}  // namespace attnzoo
