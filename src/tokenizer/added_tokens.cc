#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace attnzoo::tok {

void TokenMatcher::add(std::string_view pattern, int32_t value) {
  if (pattern.empty()) return;
  int32_t node = 0;
  for (unsigned char b : pattern) {
    int32_t next = child(node, b);
    if (next < 0) {
      next = int32_t(nodes_.size());
      nodes_.emplace_back();
      auto& ch = nodes_[size_t(node)].children;
      ch.insert(std::lower_bound(ch.begin(), ch.end(), std::make_pair(b, int32_t(-1))), {b, next});
    }
    node = next;
  }
  // A repeated pattern keeps its first value (the first token listed wins).
  if (nodes_[size_t(node)].value < 0) nodes_[size_t(node)].value = value;
  first_byte_[static_cast<unsigned char>(pattern[0])] = true;
}

int32_t TokenMatcher::child(int32_t node, unsigned char b) const {
  const auto& ch = nodes_[size_t(node)].children;
  const auto it = std::lower_bound(ch.begin(), ch.end(), std::make_pair(b, int32_t(-1)));
  return it != ch.end() && it->first == b ? it->second : -1;
}

TokenMatcher::Match TokenMatcher::find(std::string_view text, size_t from) const {
  for (size_t start = from; start < text.size(); ++start) {
    if (!first_byte_[static_cast<unsigned char>(text[start])]) continue;
    int32_t node = 0;
    Match best{std::string_view::npos, 0, -1};
    for (size_t i = start; i < text.size(); ++i) {
      node = child(node, static_cast<unsigned char>(text[i]));
      if (node < 0) break;
      if (nodes_[size_t(node)].value >= 0) best = {start, i + 1, nodes_[size_t(node)].value};
    }
    if (best.value >= 0) return best;
  }
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
  size_t done = 0;  // end of the last emitted split
  size_t from = 0;
  while (true) {
    const TokenMatcher::Match m = matcher.find(text, from);
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
