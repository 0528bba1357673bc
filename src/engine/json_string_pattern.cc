#include "engine/json_string_pattern.h"

#include <algorithm>
#include <bitset>
#include <map>

#include "core/error.h"
#include "engine/json_schema_pointer.h"

namespace attnzoo {
namespace {

using json_schema_at::refuse;

// The regex's syntax tree.
struct Re {
  enum Kind : uint8_t { bytes, set, cat, alt, rep } kind = cat;
  std::string text;           // bytes: one character's UTF-8
  std::bitset<128> ascii;     // set: its ASCII characters
  uint8_t non_ascii = 0;      // set: 0 none, 1 every non-ASCII character, 2 those but line separators (for '.')
  std::vector<Re> kids;       // cat, alt, rep (one)
  int min = 0, max = 0;       // rep; max -1: unbounded
};

// Characters a value written without escapes may hold.
std::bitset<128> writable() {
  std::bitset<128> out;
  for (int c = 0x20; c < 0x80; ++c) out[c] = c != '"' && c != '\\';
  return out;
}

Re set_of(const std::string& chars, bool negate = false) {
  Re r;
  r.kind = Re::set;
  for (char c : chars) r.ascii[uint8_t(c)] = true;
  if (negate) r.ascii = ~r.ascii, r.non_ascii = 1;
  r.ascii &= writable();
  return r;
}

std::string range(char lo, char hi) {
  std::string out;
  for (char c = lo; c <= hi; ++c) out += c;
  return out;
}

class Parser {
 public:
  Parser(const std::string& re, const std::string& pointer) : s_(re), at_(pointer) {}

  // The top-level branches, each with its own anchors: ECMA reads `^a|b$` as `(^a)|(b$)`, so `^` / `$` bind to
  // the branch they begin / end, never to the whole alternation.
  struct Branch {
    Re re;
    bool start = false, end = false;
  };
  std::vector<Branch> parse() {
    std::vector<Branch> out;
    do {
      if (!out.empty()) ++i_;  // the '|'
      Branch b;
      if ((b.start = more() && s_[i_] == '^')) ++i_;
      b.re = concatenation();
      if ((b.end = more() && s_[i_] == '$')) {
        if (i_ + 1 < end_ && s_[i_ + 1] != '|') fail("an anchor inside the pattern");
        ++i_;
      }
      out.push_back(std::move(b));
    } while (more() && s_[i_] == '|');
    if (i_ != end_) fail(std::string("unexpected '") + s_[i_] + "'");
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    refuse(at_, "pattern: " + what + " at character " + std::to_string(i_) + " (the supported subset: literals, ., "
                "classes, \\d \\w \\s, groups, |, ? * + {m,n}, ^ / $ at the start / end of a top-level branch)");
  }
  bool more() const { return i_ < end_; }

  Re alternation() {
    Re r;
    r.kind = Re::alt;
    r.kids.push_back(concatenation());
    while (more() && s_[i_] == '|') ++i_, r.kids.push_back(concatenation());
    return r.kids.size() == 1 ? std::move(r.kids[0]) : r;
  }

  Re concatenation() {
    Re r;
    r.kind = Re::cat;
    // A '$' outside groups ends the branch (parse() checks that a branch's end follows it).
    while (more() && s_[i_] != '|' && s_[i_] != ')' && !(groups_ == 0 && s_[i_] == '$'))
      r.kids.push_back(repeated(atom()));
    return r;
  }

  int number() {
    if (!more() || s_[i_] < '0' || s_[i_] > '9') fail("a count expected");
    int v = 0;
    while (more() && s_[i_] >= '0' && s_[i_] <= '9') {
      v = v * 10 + (s_[i_++] - '0');
      if (v > 1000) fail("a count above 1000");
    }
    return v;
  }

  Re repeated(Re r) {
    while (more()) {
      const char c = s_[i_];
      int lo, hi;
      if (c == '?') lo = 0, hi = 1;
      else if (c == '*') lo = 0, hi = -1;
      else if (c == '+') lo = 1, hi = -1;
      else if (c == '{') {
        ++i_;
        lo = hi = number();
        if (more() && s_[i_] == ',') {
          ++i_;
          hi = more() && s_[i_] == '}' ? -1 : number();
        }
        if (!more() || s_[i_] != '}') fail("'}' expected");
        if (hi != -1 && hi < lo) fail("{m,n} with n < m");
      } else {
        break;
      }
      ++i_;
      if (more() && s_[i_] == '?') ++i_;  // lazy: the same language
      Re rep;
      rep.kind = Re::rep, rep.min = lo, rep.max = hi;
      rep.kids.push_back(std::move(r));
      r = std::move(rep);
    }
    return r;
  }

  // An escape's class (d w s and their negations) or literal character, after the backslash.
  Re escape(bool in_class) {
    if (!more()) fail("a pattern ending in '\\'");
    const char c = s_[i_++];
    const std::string digits = range('0', '9'), word = range('a', 'z') + range('A', 'Z') + digits + "_";
    const std::string space = " \t\n\r\f\v";
    // The negations stay ASCII: Python's re reads \d \w \s with Unicode meanings, ECMA's \S leaves out Unicode
    // spaces; what is written here matches under either reading.
    const auto ascii_only = [](Re r) {
      r.non_ascii = 0;
      return r;
    };
    if (c == 'd' || c == 'D' || c == 'w' || c == 'W' || c == 's' || c == 'S') class_escape_ = true;
    switch (c) {
      case 'd': return set_of(digits);
      case 'D': return ascii_only(set_of(digits, true));
      case 'w': return set_of(word);
      case 'W': return ascii_only(set_of(word, true));
      case 's': return set_of(space);
      case 'S': return ascii_only(set_of(space, true));
      case 'n':
      case 't':
      case 'r':
      case 'f':
      case 'v': return set_of("");  // control characters: never written unescaped
      case 'u': {                   // \uXXXX: one character (not a surrogate half)
        uint32_t cp = 0;
        for (int k = 0; k < 4; ++k, ++i_) {
          const char h = more() ? s_[i_] : 0;
          const int v = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                        : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
          if (v < 0) fail("\\u needs four hex digits");
          cp = cp * 16 + uint32_t(v);
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) fail("a \\u surrogate");
        if (cp < 0x80) return set_of(std::string(1, char(cp)));
        if (in_class) fail("a non-ASCII character in a class");
        Re r;
        r.kind = Re::bytes;
        if (cp < 0x800) {
          r.text = {char(0xC0 | (cp >> 6)), char(0x80 | (cp & 0x3F))};
        } else {
          r.text = {char(0xE0 | (cp >> 12)), char(0x80 | ((cp >> 6) & 0x3F)), char(0x80 | (cp & 0x3F))};
        }
        return r;
      }
      default: break;
    }
    const bool punctuation = (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
                             (c >= 0x7B && c <= 0x7E);
    if (!punctuation) {
      --i_;
      fail(std::string("the escape \\") + c + (in_class ? " in a class" : "") + " is not supported");
    }
    return set_of(std::string(1, c));
  }

  Re klass() {
    const bool negate = more() && s_[i_] == '^';
    if (negate) ++i_;
    class_escape_ = false;
    Re r = set_of("");
    while (more() && s_[i_] != ']') {
      Re part;
      if (s_[i_] == '\\') {
        ++i_;
        part = escape(true);
      } else {
        if (uint8_t(s_[i_]) >= 0x80) fail("a non-ASCII character in a class");
        const char lo = s_[i_++];
        char hi = lo;
        if (i_ + 1 < end_ && s_[i_] == '-' && s_[i_ + 1] != ']') {
          hi = s_[i_ + 1];
          if (uint8_t(hi) >= 0x80 || hi == '\\') fail("a class range must end in a plain ASCII character");
          if (hi < lo) fail("a class range out of order");
          i_ += 2;
        }
        part = set_of(range(lo, hi));
      }
      r.ascii |= part.ascii;
      r.non_ascii = std::max(r.non_ascii, part.non_ascii);
    }
    if (!more()) fail("an unclosed '['");
    ++i_;
    if (negate) {
      r.ascii = ~r.ascii & writable();
      r.non_ascii = class_escape_ ? 0 : 1;  // [^\d]: ASCII only, as for \D
    }
    return r;
  }

  Re atom() {
    const uint8_t c = uint8_t(s_[i_]);
    if (c == '(') {
      ++i_;
      if (more() && s_[i_] == '?') {
        if (i_ + 1 < end_ && s_[i_ + 1] == ':') i_ += 2;
        else fail("lookarounds and named groups are not supported");
      }
      if (++groups_ > 64) fail("groups nested more than 64 deep");
      Re r = alternation();
      --groups_;
      if (!more() || s_[i_] != ')') fail("an unclosed '('");
      ++i_;
      return r;
    }
    if (c == '[') return ++i_, klass();
    if (c == '.') {
      ++i_;
      Re r = set_of("\n\r", true);
      r.non_ascii = 2;
      return r;
    }
    if (c == '\\') return ++i_, escape(false);
    if (c == '*' || c == '+' || c == '?' || c == '{') fail("nothing to repeat");
    if (c == '^' || c == '$') fail("an anchor inside the pattern");
    if (c == ']' || c == '}') fail(std::string("a lone '") + char(c) + "'");
    // A literal character, all of its UTF-8 bytes.
    size_t len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    if (i_ + len > end_) fail("a truncated UTF-8 character");
    if (c < 0x80) return ++i_, set_of(std::string(1, char(c)));
    Re r;
    r.kind = Re::bytes;
    r.text = s_.substr(i_, len);
    i_ += len;
    return r;
  }

  const std::string& s_;
  const std::string& at_;
  size_t i_ = 0;
  const size_t end_ = s_.size();
  bool class_escape_ = false;  // the class being read holds \d \w \s or a negation of them
  int groups_ = 0;             // open groups (the parser recurses per group)
};

// Thompson's construction: states with byte-range edges and empty edges.
class Nfa {
 public:
  explicit Nfa(const std::string& pointer) : at_(pointer) {}
  int add() {
    if (states_.size() >= 16 * StringPattern::kMaxStates) refuse(at_, "pattern: too large (repeat counts?)");
    states_.emplace_back();
    return int(states_.size() - 1);
  }
  void edge(int from, uint8_t lo, uint8_t hi, int to) { states_[from].ranges.push_back({lo, hi, to}); }
  void empty(int from, int to) { states_[from].empty.push_back(to); }

  int build(const Re& r, int from) {
    switch (r.kind) {
      case Re::bytes:
        for (char c : r.text) {
          const int to = add();
          edge(from, uint8_t(c), uint8_t(c), to);
          from = to;
        }
        return from;
      case Re::set: return set(r, from);
      case Re::cat:
        for (const Re& k : r.kids) from = build(k, from);
        return from;
      case Re::alt: {
        const int end = add();
        for (const Re& k : r.kids) {
          const int s = add();
          empty(from, s);
          empty(build(k, s), end);
        }
        return end;
      }
      case Re::rep: {
        for (int i = 0; i < r.min; ++i) from = build(r.kids[0], from);
        if (r.max < 0) {
          const int loop = add();
          empty(from, loop);
          empty(build(r.kids[0], loop), loop);
          return loop;
        }
        const int end = add();
        empty(from, end);
        for (int i = r.min; i < r.max; ++i) {
          from = build(r.kids[0], from);
          empty(from, end);
        }
        return end;
      }
    }
    return from;
  }

  struct Range {
    uint8_t lo, hi;
    int to;
  };
  struct State {
    std::vector<Range> ranges;
    std::vector<int> empty;
  };
  std::vector<State> states_;

 private:
  int set(const Re& r, int from) {
    const int end = add();
    for (int c = 0; c < 128;) {
      if (!r.ascii[c]) {
        ++c;
        continue;
      }
      int d = c;
      while (d + 1 < 128 && r.ascii[d + 1]) ++d;
      edge(from, uint8_t(c), uint8_t(d), end);
      c = d + 1;
    }
    if (!r.non_ascii) return end;
    // Well-formed UTF-8 (RFC 3629's table); '.' leaves out the E2 lead (U+2028 / U+2029 are line separators).
    const int tail1 = add(), tail2 = add(), tail3 = add();
    edge(tail1, 0x80, 0xBF, end);
    edge(tail2, 0x80, 0xBF, tail1);
    edge(tail3, 0x80, 0xBF, tail2);
    edge(from, 0xC2, 0xDF, tail1);
    const int e0 = add(), ed = add(), f0 = add(), f4 = add();
    edge(from, 0xE0, 0xE0, e0), edge(e0, 0xA0, 0xBF, tail1);
    if (r.non_ascii == 2) edge(from, 0xE1, 0xE1, tail2), edge(from, 0xE3, 0xEC, tail2);
    else edge(from, 0xE1, 0xEC, tail2);
    edge(from, 0xED, 0xED, ed), edge(ed, 0x80, 0x9F, tail1);
    edge(from, 0xEE, 0xEF, tail2);
    edge(from, 0xF0, 0xF0, f0), edge(f0, 0x90, 0xBF, tail2);
    edge(from, 0xF1, 0xF3, tail3);
    edge(from, 0xF4, 0xF4, f4), edge(f4, 0x80, 0x8F, tail2);
    return end;
  }

  const std::string& at_;
};

}  // namespace

StringPattern compile_string_pattern(const std::string& regex, const std::string& pointer) {
  std::vector<Parser::Branch> branches = Parser(regex, pointer).parse();
  // JSON Schema's pattern matches anywhere: an unanchored end takes any characters. Branches anchored alike share
  // one such run (fewer DFA states than one per branch); otherwise each branch has its own.
  Re any;
  any.kind = Re::rep, any.min = 0, any.max = -1;
  any.kids.push_back(set_of("", true));
  const auto anchored = [&](Re re, bool start, bool end) {
    Re out;
    out.kind = Re::cat;
    if (!start) out.kids.push_back(any);
    out.kids.push_back(std::move(re));
    if (!end) out.kids.push_back(any);
    return out;
  };
  const bool alike = std::all_of(branches.begin(), branches.end(), [&](const Parser::Branch& b) {
    return b.start == branches[0].start && b.end == branches[0].end;
  });
  Re either;
  either.kind = Re::alt;
  for (Parser::Branch& b : branches)
    either.kids.push_back(alike ? std::move(b.re) : anchored(std::move(b.re), b.start, b.end));
  Re whole = either.kids.size() == 1 ? std::move(either.kids[0]) : std::move(either);
  if (alike) whole = anchored(std::move(whole), branches[0].start, branches[0].end);

  Nfa nfa(pointer);
  const int start = nfa.add();
  const int accept = nfa.build(whole, start);

  const auto closure = [&](std::vector<int> set) {
    std::vector<uint8_t> seen(nfa.states_.size(), 0);
    for (int s : set) seen[s] = 1;
    for (size_t k = 0; k < set.size(); ++k)
      for (int t : nfa.states_[set[k]].empty)
        if (!seen[t]) seen[t] = 1, set.push_back(t);
    std::sort(set.begin(), set.end());
    return set;
  };
  StringPattern out;
  std::map<std::vector<int>, uint16_t> ids;
  std::vector<std::vector<int>> subsets{closure({start})};
  ids[subsets[0]] = 0;
  for (size_t d = 0; d < subsets.size(); ++d) {
    std::array<std::vector<int>, 256> moves;
    for (int s : subsets[d])
      for (const auto& r : nfa.states_[s].ranges)
        for (int b = r.lo; b <= r.hi; ++b) moves[b].push_back(r.to);
    out.next.emplace_back();
    out.next.back().fill(StringPattern::kDead);
    for (int b = 0; b < 256; ++b) {
      if (moves[b].empty()) continue;
      std::vector<int> to = closure(std::move(moves[b]));
      auto [it, fresh] = ids.try_emplace(to, uint16_t(subsets.size()));
      if (fresh) {
        if (subsets.size() >= StringPattern::kMaxStates)
          refuse(pointer, "pattern: more than " + std::to_string(StringPattern::kMaxStates) + " DFA states");
        subsets.push_back(std::move(to));
      }
      out.next[d][b] = it->second;
    }
    out.accepting.push_back(std::binary_search(subsets[d].begin(), subsets[d].end(), accept));
  }
  if (!prune_dead_ends(out)) refuse(pointer, "pattern matches no string written without escapes");
  return out;
}

bool prune_dead_ends(StringPattern& p) {
  const size_t n = p.next.size();
  std::vector<std::vector<uint16_t>> from(n);
  for (size_t d = 0; d < n; ++d)
    for (uint16_t t : p.next[d])
      if (t != StringPattern::kDead) from[t].push_back(uint16_t(d));
  std::vector<uint8_t> live(p.accepting.begin(), p.accepting.end());
  std::vector<uint16_t> stack;
  for (size_t d = 0; d < n; ++d)
    if (live[d]) stack.push_back(uint16_t(d));
  while (!stack.empty()) {
    const uint16_t t = stack.back();
    stack.pop_back();
    for (uint16_t f : from[t])
      if (!live[f]) live[f] = 1, stack.push_back(f);
  }
  for (auto& row : p.next)
    for (uint16_t& t : row)
      if (t != StringPattern::kDead && !live[t]) t = StringPattern::kDead;
  return live[p.start];
}

}  // namespace attnzoo
