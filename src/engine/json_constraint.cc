#include "engine/json_constraint.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "engine/json_sequence.h"
#include "tokenizer/tokenizer.h"

namespace attnzoo {

namespace {

// Whole UTF-8 characters, none of them a quote, backslash or control character: what a string takes as it is.
// (Without a quote the string cannot end, so a string state after them is the one before; `","` would also end
// in a string, but a different one.)
bool string_plain(const std::string& bytes) {
  if (bytes.empty() || bytes.find_first_of("\"\\") != std::string::npos) return false;
  JsonRecognizer r;
  if (!r.push(std::string_view("{\"a\":\""))) return false;
  return r.push(bytes) && r.in_string_text();
}

std::vector<int32_t> ids_where(std::span<const std::string> token_bytes, auto keep) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < token_bytes.size(); ++i)
    if (!token_bytes[i].empty() && keep(i)) ids.push_back(int32_t(i));
  return ids;
}

}  // namespace

TokenTrie::Trie::Trie(std::span<const std::string> token_bytes, std::vector<int32_t> order) {
  // Built from the ids sorted by their bytes: each node's children then come in one run, so the trie is flat
  // arrays (a node's edges contiguous) filled in one pass of a depth-first construction.
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return token_bytes[size_t(a)] < token_bytes[size_t(b)]; });
  // A frame: the node for ids order[lo, hi), which share their first `depth` bytes.
  struct Frame {
    uint32_t node;
    size_t lo, hi, depth;
  };
  nodes.emplace_back();
  std::vector<Frame> todo{{0, 0, order.size(), 0}};
  std::vector<Frame> children;
  while (!todo.empty()) {
    const Frame f = todo.back();
    todo.pop_back();
    size_t i = f.lo;
    nodes[f.node].first_token = uint32_t(tokens.size());
    while (i < f.hi && token_bytes[size_t(order[i])].size() == f.depth) tokens.push_back(order[i++]);
    nodes[f.node].num_tokens = uint32_t(tokens.size()) - nodes[f.node].first_token;
    nodes[f.node].first_edge = uint32_t(edge_byte.size());
    children.clear();
    while (i < f.hi) {
      const uint8_t b = uint8_t(token_bytes[size_t(order[i])][f.depth]);
      size_t j = i;
      while (j < f.hi && uint8_t(token_bytes[size_t(order[j])][f.depth]) == b) ++j;
      const uint32_t child = uint32_t(nodes.size() + children.size());
      edge_byte.push_back(b);
      edge_child.push_back(child);
      children.push_back({child, i, j, f.depth + 1});
      i = j;
    }
    nodes[f.node].num_edges = uint32_t(children.size());
    nodes.resize(nodes.size() + children.size());
    todo.insert(todo.end(), children.rbegin(), children.rend());
  }
}

template <class Recognizer>
int64_t TokenTrie::Trie::walk(const Recognizer& state, std::vector<uint8_t>& allowed) const {
  struct Visit {
    uint32_t node;
    Recognizer state;
  };
  thread_local std::vector<Visit> todo;  // the walk's stack, kept between steps
  todo.clear();
  todo.push_back({0, state});
  int64_t count = 0;
  while (!todo.empty()) {
    const Visit v = todo.back();
    todo.pop_back();
    const Node& node = nodes[v.node];
    for (uint32_t t = node.first_token; t < node.first_token + node.num_tokens; ++t) allowed[size_t(tokens[t])] = 1;
    count += node.num_tokens;
    for (uint32_t e = node.first_edge; e < node.first_edge + node.num_edges; ++e) {
      Recognizer next = v.state;
      if (next.push(edge_byte[e])) todo.push_back({edge_child[e], next});
    }
  }
  return count;
}

std::vector<PatternTokenHit> TokenTrie::Trie::pattern_walk(const StringPattern& pattern, uint16_t state) const {
  struct Visit {
    uint32_t node;
    uint16_t state;
    uint32_t chars;
  };
  std::vector<Visit> todo{{0, state, 0}};
  std::vector<PatternTokenHit> hits;
  while (!todo.empty()) {
    const Visit v = todo.back();
    todo.pop_back();
    const Node& node = nodes[v.node];
    for (uint32_t t = node.first_token; t < node.first_token + node.num_tokens; ++t)
      hits.push_back({v.state, v.chars, tokens[t]});
    for (uint32_t e = node.first_edge; e < node.first_edge + node.num_edges; ++e) {
      const uint8_t b = edge_byte[e];
      if (b == '"') continue;  // ends the string: what follows is the recognizer's, walked
      const uint16_t next = pattern.next[v.state][b];
      if (next != StringPattern::kDead) todo.push_back({edge_child[e], next, v.chars + (b < 0x80 || b >= 0xC0)});
    }
  }
  return hits;
}

TokenTrie::TokenTrie(std::span<const std::string> token_bytes)
    : vocab_(int64_t(token_bytes.size())),
      string_plain_(token_bytes.size(), 0),
      all_(token_bytes, ids_where(token_bytes, [](size_t) { return true; })),
      string_other_(token_bytes, ids_where(token_bytes, [&](size_t i) {
                      return !(string_plain_[i] = uint8_t(string_plain(token_bytes[i])));
                    })),
      quoted_(token_bytes, ids_where(token_bytes, [&](size_t i) {
                return token_bytes[i].find('"') != std::string::npos;
              })) {
  num_string_plain_ = std::count(string_plain_.begin(), string_plain_.end(), 1);
  std::vector<size_t> chars(token_bytes.size(), 0);
  for (size_t i = 0; i < token_bytes.size(); ++i) {
    if (!string_plain_[i]) continue;
    for (char c : token_bytes[i]) chars[i] += (uint8_t(c) & 0xC0) != 0x80;
    plain_by_chars_.push_back(int32_t(i));
  }
  std::stable_sort(plain_by_chars_.begin(), plain_by_chars_.end(),
                   [&](int32_t a, int32_t b) { return chars[size_t(a)] < chars[size_t(b)]; });
  const size_t longest = plain_by_chars_.empty() ? 0 : chars[size_t(plain_by_chars_.back())];
  plain_upto_.assign(longest + 1, 0);
  for (int32_t id : plain_by_chars_) ++plain_upto_[chars[size_t(id)]];
  for (size_t c = 1; c <= longest; ++c) plain_upto_[c] += plain_upto_[c - 1];
}

template <class Recognizer>
int64_t TokenTrie::pattern_allowed(const Recognizer& state, const JsonSchemaRecognizer::PatternText& text,
                                   std::vector<uint8_t>& out) const {
  const std::shared_ptr<const PatternTokenSet> set = pattern_sets_->get(
      *text.pattern, text.state, [&] {
        std::vector<PatternTokenHit> hits = all_.pattern_walk(**text.pattern, text.state);
        return group_pattern_tokens(hits);
      });
  out.assign(size_t(vocab_), 0);
  if (!set) return all_.walk(state, out);  // past the cache's bound
  int64_t count = 0;
  uint32_t from = 0;
  for (const PatternTokenSet::Group& g : set->groups) {
    // The token's last byte viable implies every earlier one was: a prefix of a completion is one.
    if (!text.lengths || text.lengths->viable(g.end, text.len + g.chars)) {
      for (uint32_t i = from; i < g.stop; ++i) out[size_t(set->ids[i])] = 1;
      count += g.stop - from;
    }
    from = g.stop;
  }
  return count + quoted_.walk(state, out);
}

template <class Recognizer>
int64_t TokenTrie::allowed(const Recognizer& state, std::vector<uint8_t>& out) const {
  if constexpr (requires { state.pattern_text(); }) {
    if (use_pattern_sets_) {
      if (const JsonSchemaRecognizer::PatternText text = state.pattern_text(); text.pattern)
        return pattern_allowed(state, text, out);
    }
  }
  if (state.in_string_text()) {
    const size_t room = state.string_room();
    if (room >= plain_upto_.size() - 1) {
      out = string_plain_;
      return num_string_plain_ + string_other_.walk(state, out);
    }
    // A maxLength in force: the string-plain tokens short enough, then the others walked.
    out.assign(size_t(vocab_), 0);
    for (uint32_t i = 0; i < plain_upto_[room]; ++i) out[size_t(plain_by_chars_[i])] = 1;
    return int64_t(plain_upto_[room]) + string_other_.walk(state, out);
  }
  out.assign(size_t(vocab_), 0);
  return all_.walk(state, out);
}

template int64_t TokenTrie::allowed(const JsonRecognizer&, std::vector<uint8_t>&) const;
template int64_t TokenTrie::allowed(const JsonSchemaRecognizer&, std::vector<uint8_t>&) const;
template int64_t TokenTrie::allowed(const JsonSequenceRecognizer&, std::vector<uint8_t>&) const;

std::vector<std::string> token_bytes_in_context(const tok::Tokenizer& tokenizer, int64_t vocab) {
  // One ordinary token before each id, as the StreamDecoder keeps one id of context: decoders that treat the
  // first token differently (SentencePiece's leading space) then give the bytes the streamed text shows.
  std::vector<int32_t> context = tokenizer.encode("a", /*add_special_tokens=*/false);
  if (context.size() > 1) context.erase(context.begin(), context.end() - 1);
  const std::string before = tokenizer.decode_bytes(context, /*skip_special_tokens=*/true);
  std::vector<std::string> out(static_cast<size_t>(vocab));
  std::vector<int32_t> ids = context;
  ids.push_back(0);
  for (int64_t id = 0; id < vocab; ++id) {
    ids.back() = int32_t(id);
    std::string text = tokenizer.decode_bytes(ids, /*skip_special_tokens=*/true);
    if (text.compare(0, before.size(), before) == 0)
      out[size_t(id)] = text.substr(before.size());
    else
      out[size_t(id)] = tokenizer.decode_bytes(std::span(&ids.back(), 1), /*skip_special_tokens=*/true);
  }
  return out;
}

void mask_row(std::span<float> row, std::span<const uint8_t> allowed) {
  require(allowed.size() == row.size(), "allowed", "needs one flag per logit");
  const float minus_inf = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < row.size(); ++i) row[i] = allowed[i] ? row[i] : minus_inf;
}

}  // namespace attnzoo
