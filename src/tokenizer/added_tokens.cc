#include "tokenizer/added_tokens.h"

#include <algorithm>
#include <stdexcept>

#include "core/utf8.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace attnzoo::tok {

void TokenMatcher::add(std::string_view pattern, int32_t value) {
  if (pattern.empty()) return;
  finished_ = false;
  int32_t node = 0;
  for (auto it = pattern.rbegin(); it != pattern.rend(); ++it) {  // reversed: see the header
    const unsigned char b = static_cast<unsigned char>(*it);
    int32_t next = child(node, b);
    if (next < 0) {
      next = int32_t(nodes_.size());
      nodes_.emplace_back();
      nodes_.back().depth = nodes_[size_t(node)].depth + 1;
      auto& ch = nodes_[size_t(node)].children;
      ch.insert(std::lower_bound(ch.begin(), ch.end(), std::make_pair(b, int32_t(-1))), {b, next});
    }
    node = next;
  }
  // A repeated pattern keeps its first value (the first token listed wins).
  if (nodes_[size_t(node)].value < 0) nodes_[size_t(node)].value = value;
}

void TokenMatcher::finish() {
  // Breadth-first, so a node's failure target (shallower) is complete before the node.
  std::vector<int32_t> queue{0};
  nodes_[0].fail = 0;
  nodes_[0].out = nodes_[0].value >= 0 ? 0 : -1;
  for (size_t q = 0; q < queue.size(); ++q) {
    const int32_t u = queue[q];
    for (const auto& [b, v] : nodes_[size_t(u)].children) {
      int32_t f = nodes_[size_t(u)].fail;
      int32_t target = 0;
      if (u != 0) {
        while (f != 0 && child(f, b) < 0) f = nodes_[size_t(f)].fail;
        target = child(f, b) >= 0 ? child(f, b) : 0;
      }
      Node& n = nodes_[size_t(v)];
      n.fail = target;
      n.out = n.value >= 0 ? v : nodes_[size_t(target)].out;
      queue.push_back(v);
    }
  }
  finished_ = true;
}

int32_t TokenMatcher::child(int32_t node, unsigned char b) const {
  const auto& ch = nodes_[size_t(node)].children;
  const auto it = std::lower_bound(ch.begin(), ch.end(), std::make_pair(b, int32_t(-1)));
  return it != ch.end() && it->first == b ? it->second : -1;
}

TokenMatcher::Scan TokenMatcher::scan(std::string_view text) const {
  if (!finished_) throw std::logic_error("TokenMatcher::scan before finish()");
  Scan s;
  s.length_.assign(text.size(), 0);
  s.value_.assign(text.size(), -1);
  int32_t state = 0;
  for (size_t i = text.size(); i-- > 0;) {
    const unsigned char b = static_cast<unsigned char>(text[i]);
    while (state != 0 && child(state, b) < 0) state = nodes_[size_t(state)].fail;
    const int32_t next = child(state, b);
    state = next >= 0 ? next : 0;
    // The deepest pattern on the chain is the longest one that is a prefix of text[i:].
    if (const int32_t o = nodes_[size_t(state)].out; o > 0) {
      s.length_[i] = nodes_[size_t(o)].depth;
      s.value_[i] = nodes_[size_t(o)].value;
    }
  }
  return s;
}

TokenMatcher::Match TokenMatcher::Scan::find(size_t from) const {
  for (size_t start = from; start < length_.size(); ++start)
    if (length_[start] > 0) return {start, start + length_[start], value_[start]};
  return {std::string_view::npos, 0, -1};
}

namespace {

// Rust regex's \w: Alphabetic, marks, decimal digits, connector punctuation, joiners.
bool is_word_char(uint32_t cp) {
  static const Regex word(R"(\A[\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}]\z)", false);
  std::string s;
  utf8::append(s, cp);
  return !word.find_all(s).empty();
}

uint32_t last_char(std::string_view s) {
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  uint32_t cp = 0;
  utf8::decode(s, i, &cp);
  return cp;
}

uint32_t first_char(std::string_view s) {
  uint32_t cp = 0;
  utf8::decode(s, 0, &cp);
  return cp;
}

void split_one(Piece& piece, const TokenMatcher& matcher, const std::vector<AddedToken>& tokens, Pieces& out) {
  const std::string& text = piece.text;
  const TokenMatcher::Scan scan = matcher.scan(text);
  size_t done = 0;  // end of the last emitted split
  size_t from = 0;
  while (true) {
    const TokenMatcher::Match m = scan.find(from);
    if (m.start == std::string_view::npos) break;
    from = m.end;
    const AddedToken& tok = tokens[size_t(m.value)];
    size_t start = m.start, stop = m.end;
    if (tok.single_word) {
      const bool start_ok = start == 0 || !is_word_char(last_char(std::string_view(text).substr(0, start)));
      const bool stop_ok = stop == text.size() || !is_word_char(first_char(std::string_view(text).substr(stop)));
      if (!start_ok || !stop_ok) continue;
    }
    if (tok.lstrip) {
      size_t s = start;
      while (s > 0) {
        size_t p = s - 1;
        while (p > 0 && (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80) --p;
        uint32_t cp = 0;
        utf8::decode(text, p, &cp);
        if (!unicode::is_white_space(cp)) break;
        s = p;
      }
      start = std::max(s, done);
    }
    if (tok.rstrip) {
      uint32_t cp = 0;
      size_t n;
      while (stop < text.size() && (n = utf8::decode(text, stop, &cp)) && unicode::is_white_space(cp)) stop += n;
    }
    if (done < start) out.push_back(Piece{text.substr(done, start - done), -1, piece.at_start && done == 0});
    out.push_back(Piece{text.substr(start, stop - start), tok.id, piece.at_start && start == 0});
    done = stop;
  }
  if (done < text.size()) out.push_back(Piece{text.substr(done), -1, piece.at_start && done == 0});
}

}  // namespace

void split_on_added(Pieces& pieces, const TokenMatcher& matcher, const std::vector<AddedToken>& tokens) {
  Pieces out;
  out.reserve(pieces.size());
  for (Piece& p : pieces) {
    if (p.id >= 0 || matcher.empty()) {
      if (p.id >= 0 || !p.text.empty()) out.push_back(std::move(p));
      continue;
    }
    split_one(p, matcher, tokens, out);
  }
  pieces = std::move(out);
}

}  // namespace attnzoo::tok
