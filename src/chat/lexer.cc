#include "chat/lexer.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "chat/error.h"
#include "chat/text.h"
#include "core/utf8.h"

namespace attnzoo::chat {

TemplateError::TemplateError(Kind kind, int line, int column, const std::string& message)
    : ArgumentError(line > 0 ? "chat template line " + std::to_string(line) + ", column " + std::to_string(column) +
                                   ": " + kind_name(kind) + ": " + message
                             : std::string("chat template: ") + kind_name(kind) + ": " + message),
      kind(kind),
      line(line),
      column(column),
      detail(message) {}

const char* kind_name(TemplateError::Kind kind) {
  switch (kind) {
    case TemplateError::Kind::syntax: return "syntax error";
    case TemplateError::Kind::runtime: return "error";
    case TemplateError::Kind::raised: return "raise_exception";
    case TemplateError::Kind::limit: return "limit exceeded";
  }
  return "error";
}

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// Where the whitespace that ends `text` begins. Whitespace is what jinja2's \s matches when it strips text before
// a tag (lstrip_blocks, `{%-`): Python's, so U+00A0 and U+3000 too.
size_t trailing_space_start(const std::string& text) {
  size_t end = text.size();
  while (end > 0) {
    size_t b = end - 1;
    while (b > 0 && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80) --b;
    uint32_t cp = 0;
    if (utf8::decode(text, b, &cp) != end - b || !text::is_space(cp)) break;
    end = b;
  }
  return end;
}

class Lexer {
 public:
  Lexer(std::string source, const LexOptions& options) : s_(std::move(source)), options_(options) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < s_.size(); ++i) {
      if (s_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < s_.size()) {
      const size_t tag = find_tag(pos_);
      std::string text = s_.substr(pos_, tag - pos_);
      const size_t text_pos = pos_;
      if (tag == s_.size()) {
        emit_text(std::move(text), text_pos);
        break;
      }
      const char type = s_[tag + 1];  // '{', '%' or '#'
      const bool raw = type == '%' && raw_begin_end(tag) != 0;
      const char sign = tag + 2 < s_.size() && (s_[tag + 2] == '-' || s_[tag + 2] == '+') ? s_[tag + 2] : 0;
      if (sign == '-') {
        text.resize(trailing_space_start(text));
      } else if (sign != '+' && options_.lstrip_blocks && type != '{') {
        lstrip_line(text, line_starting);
      }
      emit_text(std::move(text), text_pos);
      if (raw) {
        pos_ = raw_begin_end(tag);
        line_starting = lex_raw_body();
      } else if (type == '#') {
        line_starting = lex_comment(tag);
      } else {
        pos_ = tag + 2 + (sign ? 1 : 0);
        push(type == '{' ? Token::Kind::var_begin : Token::Kind::block_begin, "", tag);
        line_starting = lex_tag(type == '{');
      }
    }
    push(Token::Kind::eof, "", s_.size());
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(size_t pos, const std::string& message) const {
    auto [line, col] = place(pos);
    throw TemplateError(TemplateError::Kind::syntax, line, col, message);
  }

  std::pair<int, int> place(size_t pos) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), pos) - 1;
    return {int(it - line_starts_.begin()) + 1, int(pos - *it) + 1};
  }

  void push(Token::Kind kind, std::string text, size_t pos) {
    Token t{kind, std::move(text)};
    std::tie(t.line, t.column) = place(pos);
    tokens_.push_back(std::move(t));
  }

  void emit_text(std::string text, size_t pos) {
    if (!text.empty()) push(Token::Kind::text, std::move(text), pos);
  }

  size_t find_tag(size_t from) const {
    for (size_t i = from; i + 1 < s_.size(); ++i) {
      if (s_[i] == '{' && (s_[i + 1] == '{' || s_[i + 1] == '%' || s_[i + 1] == '#')) return i;
    }
    return s_.size();
  }

  // lstrip_blocks: drop the whitespace between the last line start and the tag when nothing else is there.
  static void lstrip_line(std::string& text, bool line_starting) {
    const size_t nl = text.rfind('\n');
    const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
    if (l_pos == 0 && !line_starting) return;
    if (trailing_space_start(text) <= l_pos) text.resize(l_pos);
  }

  // Whitespace as jinja2's \s: Python's, U+3000 and U+00A0 too (between a tag's tokens, and after `-%}`).
  size_t skip_space(size_t i) const {
    for (uint32_t cp = 0; i < s_.size();) {
      const size_t n = text::next_char(s_, i, &cp);
      if (!text::is_space(cp)) break;
      i += n;
    }
    return i;
  }

  // `{%[-+]? raw [-]?%}` at `tag`: the position after it, or 0 when this is not a raw tag.
  size_t raw_begin_end(size_t tag) const {
    size_t i = tag + 2;
    if (i < s_.size() && (s_[i] == '-' || s_[i] == '+')) ++i;
    i = skip_space(i);
    if (s_.compare(i, 3, "raw") != 0) return 0;
    i = skip_space(i + 3);
    if (s_.compare(i, 3, "-%}") == 0) return skip_space(i + 3);
    if (s_.compare(i, 2, "%}") == 0) return i + 2;
    return 0;
  }

  // After a closing `%}` / `#}` at i (pointing past it): trim_blocks, or `-` stripping handled by the caller.
  size_t after_block_end(size_t i, char sign) const {
    if (sign == '-') return skip_space(i);
    if (sign != '+' && options_.trim_blocks && i < s_.size() && s_[i] == '\n') return i + 1;
    return i;
  }

  bool lex_comment(size_t tag) {
    const size_t body = tag + 2 + (tag + 2 < s_.size() && (s_[tag + 2] == '-' || s_[tag + 2] == '+') ? 1 : 0);
    const size_t close = s_.find("#}", body);
    if (close == std::string::npos) fail(tag, "missing end of comment tag '#}'");
    const char sign = close > body && (s_[close - 1] == '-' || s_[close - 1] == '+') ? s_[close - 1] : 0;
    pos_ = after_block_end(close + 2, sign);
    return s_[pos_ - 1] == '\n';
  }

  bool lex_raw_body() {
    for (size_t i = pos_;; ++i) {
      i = s_.find("{%", i);
      if (i == std::string::npos) fail(pos_, "missing end of raw directive ({% endraw %})");
      size_t j = i + 2;
      const char open_sign = j < s_.size() && (s_[j] == '-' || s_[j] == '+') ? s_[j] : 0;
      if (open_sign) ++j;
      j = skip_space(j);
      if (s_.compare(j, 6, "endraw") != 0) continue;
      j = skip_space(j + 6);
      char close_sign = 0;
      if (j < s_.size() && (s_[j] == '-' || s_[j] == '+')) close_sign = s_[j++];
      if (s_.compare(j, 2, "%}") != 0) continue;
      std::string text = s_.substr(pos_, i - pos_);
      if (open_sign == '-') {
        text.resize(trailing_space_start(text));
      } else if (open_sign != '+' && options_.lstrip_blocks) {
        lstrip_line(text, false);
      }
      emit_text(std::move(text), pos_);
      pos_ = after_block_end(j + 2, close_sign);
      return s_[pos_ - 1] == '\n';
    }
  }

  // Expression tokens up to the end of a `{{ }}` or `{% %}` tag. Returns whether the tag's end consumed a newline.
  bool lex_tag(bool variable) {
    const size_t start = pos_;
    std::vector<char> balance;
    for (;;) {
      pos_ = skip_space(pos_);
      if (pos_ >= s_.size()) {
        fail(start, variable ? "unexpected end of template, expected '}}'" : "unexpected end of template, expected '%}'");
      }
      if (balance.empty()) {
        const char* close = variable ? "}}" : "%}";
        for (char sign : {'-', '+', '\0'}) {
          if (sign == '+' && variable) continue;
          const size_t at = pos_ + (sign ? 1 : 0);
          if ((sign && s_[pos_] != sign) || s_.compare(at, 2, close) != 0) continue;
          push(variable ? Token::Kind::var_end : Token::Kind::block_end, "", pos_);
          pos_ = variable ? (sign == '-' ? skip_space(at + 2) : at + 2) : after_block_end(at + 2, sign);
          return pos_ > 0 && s_[pos_ - 1] == '\n';
        }
      }
      lex_one(balance);
    }
  }

  void lex_one(std::vector<char>& balance) {
    const size_t at = pos_;
    const char c = s_[pos_];
    const bool after_dot = !tokens_.empty() && tokens_.back().kind == Token::Kind::op && tokens_.back().text == ".";
    if (is_digit(c)) return lex_number(after_dot);
    if (is_name_start(c)) {
      while (pos_ < s_.size() && is_name_char(s_[pos_])) ++pos_;
      return push(Token::Kind::name, s_.substr(at, pos_ - at), at);
    }
    if (c == '\'' || c == '"') return lex_string();
    static const char* kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : kTwo) {
      if (s_.compare(pos_, 2, op) == 0) {
        pos_ += 2;
        return push(Token::Kind::op, op, at);
      }
    }
    if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos) {
      fail(at, c >= 0x20 && c < 0x7f ? std::string("unexpected character '") + c + "'" : "unexpected byte in a tag");
    }
    if (c == '(' || c == '[' || c == '{') balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) fail(at, std::string("unexpected '") + c + "'");
      if (balance.back() != c) fail(at, std::string("unexpected '") + c + "', expected '" + balance.back() + "'");
      balance.pop_back();
    }
    ++pos_;
    push(Token::Kind::op, std::string(1, c), at);
  }

  // Jinja numbers: 1_000, 1.5, 2e3, 1.5E-2 (a fraction needs digits after the point). After '.' only an integer,
  // so `x.0.1` is two subscripts.
  void lex_number(bool integer_only) {
    const size_t at = pos_;
    auto digits = [&] {
      while (pos_ < s_.size() && (is_digit(s_[pos_]) || (s_[pos_] == '_' && pos_ + 1 < s_.size() && is_digit(s_[pos_ + 1])))) ++pos_;
    };
    digits();
    bool is_float = false;
    if (!integer_only && pos_ + 1 < s_.size() && s_[pos_] == '.' && is_digit(s_[pos_ + 1])) {
      ++pos_;
      digits();
      is_float = true;
    }
    if (!integer_only && pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      size_t j = pos_ + 1;
      if (j < s_.size() && (s_[j] == '+' || s_[j] == '-')) ++j;
      if (j < s_.size() && is_digit(s_[j])) {
        pos_ = j;
        digits();
        is_float = true;
      }
    }
    std::string text;
    for (size_t i = at; i < pos_; ++i) {
      if (s_[i] != '_') text += s_[i];
    }
    push(is_float ? Token::Kind::floating : Token::Kind::integer, text, at);
    Token& t = tokens_.back();
    if (is_float) {
      t.float_value = std::strtod(text.c_str(), nullptr);
      if (!std::isfinite(t.float_value)) fail(at, "number out of range: " + text);
    } else {
      errno = 0;
      char* end = nullptr;
      const long long v = std::strtoll(text.c_str(), &end, 10);
      if (errno == ERANGE) fail(at, "integer out of range: " + text);
      t.int_value = v;
    }
  }

  static int hex_value(char c) {
    if (is_digit(c)) return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // Python string-literal escapes (Jinja decodes them with "unicode-escape"); unknown escapes stay as written.
  void lex_string() {
    const size_t at = pos_;
    const char quote = s_[pos_++];
    std::string out;
    for (;;) {
      if (pos_ >= s_.size()) fail(at, "unterminated string literal");
      const char c = s_[pos_];
      if (c == quote) {
        ++pos_;
        break;
      }
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      if (pos_ + 1 >= s_.size()) fail(at, "unterminated string literal");
      const char e = s_[pos_ + 1];
      pos_ += 2;
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case '\n': break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7': {
          // \ooo: one to three octal digits, up to \777 (U+01FF), as Python's unicode-escape reads them.
          uint32_t cp = uint32_t(e - '0');
          for (int k = 0; k < 2 && pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '7'; ++k) cp = cp * 8 + uint32_t(s_[pos_++] - '0');
          utf8::append(out, cp);
          break;
        }
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (size_t k = 0; k < n; ++k) {
            const int h = pos_ + k < s_.size() ? hex_value(s_[pos_ + k]) : -1;
            if (h < 0) fail(pos_ - 2, std::string("truncated \\") + e + " escape in a string literal");
            cp = cp * 16 + uint32_t(h);
          }
          pos_ += n;
          if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) fail(pos_ - n - 2, "escape is not a Unicode scalar value");
          utf8::append(out, cp);
          break;
        }
        default:
          out += '\\';
          out += e;
      }
    }
    push(Token::Kind::string, std::move(out), at);
  }

  std::string s_;
  LexOptions options_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const LexOptions& options) {
  if (!utf8::is_valid(source)) throw TemplateError(TemplateError::Kind::syntax, 0, 0, "the template is not valid UTF-8");
  // Jinja reads \r\n, \r and \n alike as line breaks and writes \n.
  std::string text;
  text.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      text += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      text += source[i];
    }
  }
  if (!options.keep_trailing_newline && !text.empty() && text.back() == '\n') text.pop_back();
  return Lexer(std::move(text), options).run();
}

}  // namespace attnzoo::chat
