#include "engine/json_pattern_tokens.h"

#include <algorithm>
#include <tuple>

namespace attnzoo {

PatternTokenSet group_pattern_tokens(std::vector<PatternTokenHit>& hits) {
  // By (end, chars) so that one viable() decides a group; ids ascending inside it so the flags are set in order.
  std::sort(hits.begin(), hits.end(), [](const PatternTokenHit& a, const PatternTokenHit& b) {
    return std::tie(a.end, a.chars, a.id) < std::tie(b.end, b.chars, b.id);
  });
  PatternTokenSet set;
  set.ids.reserve(hits.size());
  for (size_t i = 0; i < hits.size(); ++i) {
    if (i > 0 && (hits[i].end != hits[i - 1].end || hits[i].chars != hits[i - 1].chars))
      set.groups.push_back({hits[i - 1].end, hits[i - 1].chars, uint32_t(i)});
    set.ids.push_back(hits[i].id);
  }
  if (!hits.empty()) set.groups.push_back({hits.back().end, hits.back().chars, uint32_t(hits.size())});
  set.groups.shrink_to_fit();
  return set;
}

PatternTokenCache::Entry* PatternTokenCache::find(const std::shared_ptr<const StringPattern>& pattern) {
  for (Entry& e : entries_)
    if (e.key == pattern.get() && !e.pattern.expired()) return &e;
  return nullptr;
}

std::shared_ptr<const PatternTokenSet>& PatternTokenCache::slot_for(
    const std::shared_ptr<const StringPattern>& pattern, uint16_t state) {
  if (Entry* e = find(pattern)) return e->sets[state];
  drop_expired();
  entries_.push_back({pattern, pattern.get(), {}});
  entries_.back().sets.resize(pattern->next.size());
  return entries_.back().sets[state];
}

void PatternTokenCache::drop_expired() {
  // Only DFAs nobody holds: a set in use stays valid (a caller's recognizer holds its schema, hence its DFA).
  std::erase_if(entries_, [&](const Entry& e) {
    if (!e.pattern.expired()) return false;
    for (const auto& s : e.sets)
      if (s) bytes_ -= s->bytes();
    return true;
  });
}

bool PatternTokenCache::fits(size_t more) {
  if (bytes_ + more > max_bytes_) drop_expired();
  return bytes_ + more <= max_bytes_;
}

}  // namespace attnzoo
