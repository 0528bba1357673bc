#include "answers/tool_format_pythonic.h"

#include <algorithm>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "core/utf8.h"
#include "loader/json_writer.h"

namespace attnzoo::answers {
namespace {

// A recursive-descent reader of the Python subset the format allows, writing the values as JSON as it goes.
class PythonicReader {
 public:
  explicit PythonicReader(std::string_view s) : s_(s) {}

  size_t pos() const { return i_; }
  void seek(size_t i) { i_ = i; }

  // The whole text as a list of calls; false on anything else.
  bool calls(std::vector<ToolCall>& out) {
    space();
    if (!eat('[')) return false;
    do {
      space();
      if (peek() == ']' && !out.empty()) break;  // a trailing comma
      ToolCall c;
      if (!call(c)) return false;
      out.push_back(std::move(c));
      space();
    } while (eat(','));
    if (!eat(']')) return false;
    space();
    return i_ == s_.size() && !out.empty();
  }

 public:  // (PythonicCallStream reads a call piece by piece)
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  bool eat(char c) {
    if (peek() != c) return false;
    ++i_;
    return true;
  }
  void space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  // `known`: where word characters read before (from i_) end, so that a name growing token by token is read once.
  std::string_view identifier(size_t known = 0) {
    const size_t b = i_;
    if (!word_start(peek())) return {};
    i_ = std::max(i_, std::min(known, s_.size()));
    while (word_char(peek())) ++i_;
    return s_.substr(b, i_ - b);
  }

  // One keyword of a call at i_ (what call() reads for it): once its value is followed by ',' or ')', its JSON
  // pair joins `arguments` (the keywords `seen` before it not repeated) and its ',' is eaten; false while it is not
  // so (not yet whole, or not a keyword argument).
  bool keyword(std::set<std::string>& seen, std::string& arguments) {
    const std::string_view key = identifier();
    space();
    if (key.empty() || !eat('=') || seen.contains(std::string(key))) return false;
    space();
    json::Writer w;  // one pair at a time: its text joins the ones before
    w.begin_object().key(key);
    if (!value(w)) return false;
    space();
    if (peek() != ',' && peek() != ')') return false;  // (a number may go on; the end may be cut)
    eat(',');
    seen.insert(std::string(key));
    const std::string pair = w.end_object().take();
    if (arguments.size() > 1) arguments += ',';
    arguments += std::string_view(pair).substr(1, pair.size() - 2);
    return true;
  }

 private:
  std::string_view s_;
  size_t i_ = 0;
  int depth_ = 0;

  static bool word_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
  static bool word_char(char c) { return word_start(c) || (c >= '0' && c <= '9'); }

  bool call(ToolCall& c) {
    const std::string_view name = identifier();
    space();
    if (name.empty() || !eat('(')) return false;
    json::Writer w;
    w.begin_object();
    std::set<std::string_view> seen;
    space();
    while (!eat(')')) {
      const std::string_view key = identifier();
      space();
      // Positional arguments (vLLM drops them silently) and repeated keywords (a Python syntax error) are no call.
      if (key.empty() || !eat('=') || !seen.insert(key).second) return false;
      space();
      w.key(key);
      if (!value(w)) return false;
      space();
      if (eat(',')) space();
      else if (peek() != ')') return false;
    }
    w.end_object();
    c.name = std::string(name);
    c.arguments = w.take();
    c.id = new_tool_call_id(ToolFormat::pythonic);
    return true;
  }

  bool value(json::Writer& w) {
    if (++depth_ > 64) return false;
    const bool ok = value_inner(w);
    --depth_;
    return ok;
  }

  bool value_inner(json::Writer& w) {
    const char c = peek();
    if (c == '"' || c == '\'') {
      std::string str;
      if (!string(str)) return false;
      w.value(str);
      return true;
    }
    if (c == '[') {
      ++i_;
      w.begin_array();
      for (space(); !eat(']'); space()) {
        if (!value(w)) return false;
        space();
        if (!eat(',') && peek() != ']') return false;
      }
      w.end_array();
      return true;
    }
    if (c == '{') {
      ++i_;
      w.begin_object();
      std::set<std::string> keys;
      for (space(); !eat('}'); space()) {
        std::string key;
        if ((peek() != '"' && peek() != '\'') || !string(key)) return false;  // JSON keys are strings
        space();
        if (!eat(':') || !keys.insert(key).second) return false;
        space();
        w.key(key);
        if (!value(w)) return false;
        space();
        if (!eat(',') && peek() != '}') return false;
      }
      w.end_object();
      return true;
    }
    if (word_start(c)) {
      const std::string_view word = identifier();
      if (word == "True") w.value(true);
      else if (word == "False") w.value(false);
      else if (word == "None") w.null();
      else return false;  // a variable or a call: not a literal
      return true;
    }
    return number(w);
  }

  bool number(json::Writer& w) {
    std::string digits;
    bool negative = false, integral = true;
    while (peek() == '-' || peek() == '+') negative ^= s_[i_++] == '-';
    const size_t b = i_;
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c >= '0' && c <= '9') digits += c;
      else if (c == '_' && i_ > b) {
      } else if (c == '.' || c == 'e' || c == 'E') {
        integral = false;
        digits += c;
      } else if ((c == '-' || c == '+') && !digits.empty() && (digits.back() == 'e' || digits.back() == 'E')) {
        digits += c;
      } else {
        break;
      }
      ++i_;
    }
    if (digits.empty() || digits == "." || word_char(peek())) return false;
    if (integral && digits.size() > 1 && digits[0] == '0') return false;  // Python 3 refuses 012
    errno = 0;
    char* end = nullptr;
    if (integral) {
      const long long v = std::strtoll(digits.c_str(), &end, 10);
      if (errno == 0 && *end == '\0') {
        w.value(int64_t(negative ? -v : v));
        return true;
      }
      errno = 0;  // beyond 64 bits: as a double, as JSON readers take it
    }
    const double d = std::strtod(digits.c_str(), &end);
    if (*end != '\0' || errno == ERANGE) return false;
    w.value(negative ? -d : d);
    return true;
  }

  bool hex(size_t n, uint32_t& cp) {
    if (i_ + n > s_.size()) return false;
    cp = 0;
    for (size_t k = 0; k < n; ++k) {
      const char c = s_[i_++];
      const int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0) return false;
      cp = cp * 16 + uint32_t(d);
    }
    return cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
  }

  // A Python string literal in either quote, single or triple, with Python's escapes.
  bool string(std::string& out) {
    const char q = s_[i_];
    const bool triple = s_.substr(i_, 3) == std::string(3, q);
    i_ += triple ? 3 : 1;
    for (;;) {
      if (i_ >= s_.size()) return false;
      const char c = s_[i_];
      if (c == q && (!triple || s_.substr(i_, 3) == std::string(3, q))) {
        i_ += triple ? 3 : 1;
        return true;
      }
      if (c == '\n' && !triple) return false;
      ++i_;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) return false;
      const char e = s_[i_++];
      uint32_t cp = 0;
      switch (e) {
        case '\n': break;  // a continued line
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case 'a': out += '\a'; break;
        case '0': out += '\0'; break;
        case 'x': if (!hex(2, cp)) return false; utf8::append(out, cp); break;
        case 'u': if (!hex(4, cp)) return false; utf8::append(out, cp); break;
        case 'U': if (!hex(8, cp)) return false; utf8::append(out, cp); break;
        default: out += '\\'; out += e; break;  // Python keeps an unknown escape as written
      }
    }
  }
};

}  // namespace

ParsedAnswer parse_pythonic_tool_calls(std::string_view text) {
  ParsedAnswer out;
  std::vector<ToolCall> calls;
  if (PythonicReader(text).calls(calls)) out.calls = std::move(calls);
  else out.content = std::string(text);
  return out;
}

bool PythonicCallStream::keyword_may_end(std::string_view s) {
  // Strings as PythonicReader::string reads them (a quote opens a triple-quoted one when three come: undecided
  // while fewer than three bytes are there); a value that parses has its brackets balanced.
  while (!ended_ && lex_ < s.size()) {
    const char c = s[lex_];
    if (quote_ != 0) {
      if (c == '\\') {
        lex_ += 2;
      } else if (c == '\n' && !triple_) {
        ended_ = true;  // not a string: the parse says so
      } else if (c != quote_) {
        ++lex_;
      } else if (!triple_) {
        quote_ = 0;
        ++lex_;
      } else if (s.size() - lex_ < 3) {
        return false;
      } else if (s.substr(lex_, 3) == std::string(3, quote_)) {
        quote_ = 0;
        lex_ += 3;
      } else {
        ++lex_;
      }
      continue;
    }
    if (c == '\'' || c == '"') {
      if (s.size() - lex_ < 3 && s.find_first_not_of(c, lex_) == std::string_view::npos) return false;
      triple_ = s.substr(lex_, 3) == std::string(3, c);
      quote_ = c;
      lex_ += triple_ ? 3 : 1;
      continue;
    }
    // Only a ',' or closing bracket outside the value's brackets may end it: then the value's text is all there, and
    // a value that does not parse up to it never will.
    if (c == '(' || c == '[' || c == '{') ++depth_;
    else if ((c == ')' || c == ']' || c == '}') && depth_ > 0) --depth_;
    else if (c == ')' || c == ']' || c == '}' || (c == ',' && depth_ == 0)) ended_ = true;
    if (!ended_) ++lex_;
  }
  return ended_;
}

size_t PythonicCallStream::feed(std::string_view text) {
  const size_t first = settled_;
  PythonicReader r(text);
  for (;;) {
    switch (phase_) {
      case Phase::list:  // only whitespace comes before the '[' (read once: pos_ follows it)
        r.seek(pos_);
        r.space();
        pos_ = r.pos();
        if (!r.eat('[')) return first;
        pos_ = lex_ = r.pos();
        phase_ = Phase::name;
        break;
      case Phase::name: {  // read again until the '(' (the name may still grow; the space before it does not)
        r.seek(pos_);
        r.space();
        pos_ = r.pos();
        const std::string_view name = r.identifier(lex_);
        lex_ = pos_ + name.size();
        r.space();
        if (name.empty() || !r.eat('(')) return first;
        calls_.push_back({std::string(name), "{"});
        seen_.clear();
        pos_ = lex_ = r.pos();
        phase_ = Phase::keywords;
        break;
      }
      case Phase::keywords:
        r.seek(pos_);
        r.space();
        pos_ = r.pos();
        if (r.eat(')')) {
          calls_.back().arguments += '}';
          pos_ = r.pos();
          phase_ = Phase::after;
          break;
        }
        if (!keyword_may_end(text)) return first;
        r.seek(pos_);
        if (!r.keyword(seen_, calls_.back().arguments)) {
          // A ',' or ')' outside its strings and brackets follows it, so no later text makes it parse: the whole
          // answer's reading (the same grammar) makes the answer content, and no call after it streams.
          phase_ = Phase::stopped;
          return first;
        }
        pos_ = lex_ = r.pos();
        depth_ = 0;
        quote_ = 0;
        ended_ = false;
        break;
      case Phase::after:
        r.seek(pos_);
        r.space();
        pos_ = r.pos();
        if (pos_ == text.size()) return first;
        if (!r.eat(',')) {
          phase_ = Phase::stopped;  // (no call after it; the whole answer's reading decides)
          return first;
        }
        ++settled_;
        pos_ = lex_ = r.pos();
        phase_ = Phase::name;
        break;
      case Phase::stopped:
        return first;
    }
  }
}

bool may_be_pythonic_calls(std::string_view answer) {
  const size_t at = answer.find_first_not_of(" \t\r\n");
  return at == std::string_view::npos || answer[at] == '[';
}

}  // namespace attnzoo::answers
