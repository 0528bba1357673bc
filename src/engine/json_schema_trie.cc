// The schema's byte tries (an object's quoted keys, a literal's values): built by the compiler, walked by the
// recognizer through JsonSchema::trie_child.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "engine/json_schema.h"

namespace attnzoo {

uint32_t JsonSchema::add_trie(const std::vector<std::string>& words, bool keys) {
  const uint32_t root = uint32_t(trie.size());
  trie.emplace_back();
  for (size_t i = 0; i < words.size(); ++i) {
    const uint64_t bit = keys ? uint64_t(1) << i : ~uint64_t(0);
    uint32_t at = root;
    trie[at].mask |= bit;
    for (char c : words[i]) {
      uint32_t next = trie_child(at, uint8_t(c));
      if (next == kUnbounded) {
        next = uint32_t(trie.size());
        trie.emplace_back();
        auto& edges = trie[at].edges;
        edges.insert(std::upper_bound(edges.begin(), edges.end(), std::make_pair(uint8_t(c), next)),
                     {uint8_t(c), next});
      }
      at = next;
      trie[at].mask |= bit;
    }
    trie[at].terminal = int32_t(i);
  }
  return root;
}

}  // namespace attnzoo
