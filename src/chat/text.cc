#include "chat/text.h"

#include <algorithm>

#include "core/utf8.h"

namespace attnzoo::chat::text {
namespace {

struct Char {
  uint32_t cp;
  size_t begin, end;
};

std::vector<Char> chars_of(const std::string& s) {
  std::vector<Char> out;
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    const size_t n = next_char(s, i, &cp);
    out.push_back({cp, i, i + n});
    i += n;
  }
  return out;
}

bool is_upper_ascii(char c) { return c >= 'A' && c <= 'Z'; }
bool is_lower_ascii(char c) { return c >= 'a' && c <= 'z'; }
char to_upper(char c) { return is_lower_ascii(c) ? char(c - 32) : c; }
char to_lower(char c) { return is_upper_ascii(c) ? char(c + 32) : c; }

}  // namespace

size_t next_char(const std::string& s, size_t i, uint32_t* cp) {
  const size_t n = utf8::decode(s, i, cp);
  if (n > 0) return n;
  *cp = static_cast<unsigned char>(s[i]);
  return 1;
}

bool is_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f ||
         cp == 0x3000;
}

std::string strip(const std::string& s, const std::optional<std::string>& chars, bool left, bool right) {
  const std::vector<Char> cs = chars_of(s);
  std::vector<uint32_t> set;  // sorted, so a long `chars` does not make stripping quadratic
  if (chars) {
    for (const Char& c : chars_of(*chars)) set.push_back(c.cp);
    std::sort(set.begin(), set.end());
  }
  auto strippable = [&](uint32_t cp) { return chars ? std::binary_search(set.begin(), set.end(), cp) : is_space(cp); };
  size_t b = 0, e = cs.size();
  if (left) {
    while (b < e && strippable(cs[b].cp)) ++b;
  }
  if (right) {
    while (e > b && strippable(cs[e - 1].cp)) --e;
  }
  if (b == e) return "";
  return s.substr(cs[b].begin, cs[e - 1].end - cs[b].begin);
}

std::vector<std::string> split(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t start = 0;
    for (;;) {
      if (maxsplit >= 0 && int64_t(out.size()) >= maxsplit) break;
      const size_t at = s.find(*sep, start);
      if (at == std::string::npos) break;
      out.push_back(s.substr(start, at - start));
      start = at + sep->size();
    }
    out.push_back(s.substr(start));
    return out;
  }
  const std::vector<Char> cs = chars_of(s);
  size_t i = 0;
  while (i < cs.size()) {
    while (i < cs.size() && is_space(cs[i].cp)) ++i;
    if (i == cs.size()) break;
    if (maxsplit >= 0 && int64_t(out.size()) >= maxsplit) {  // the rest, trailing whitespace included
      out.push_back(s.substr(cs[i].begin));
      break;
    }
    size_t j = i;
    while (j < cs.size() && !is_space(cs[j].cp)) ++j;
    out.push_back(s.substr(cs[i].begin, cs[j - 1].end - cs[i].begin));
    i = j;
  }
  return out;
}

size_t split_count(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit) {
  if (sep) {
    const uint64_t found = uint64_t(count(s, *sep));
    return size_t(maxsplit < 0 ? found : std::min(found, uint64_t(maxsplit))) + 1;
  }
  uint64_t words = 0;
  bool in_word = false;
  for (const Char& c : chars_of(s)) {
    const bool space = is_space(c.cp);
    words += !space && !in_word;
    in_word = !space;
  }
  return size_t(maxsplit < 0 ? words : std::min(words, uint64_t(maxsplit) + 1));
}

std::vector<std::string> rsplit(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit) {
  if (maxsplit < 0) return split(s, sep, maxsplit);
  std::vector<std::string> out;
  if (sep) {
    size_t end = s.size();
    while (int64_t(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      const size_t at = s.rfind(*sep, end - sep->size());
      if (at == std::string::npos) break;
      out.insert(out.begin(), s.substr(at + sep->size(), end - at - sep->size()));
      end = at;
    }
    out.insert(out.begin(), s.substr(0, end));
    return out;
  }
  const std::vector<Char> cs = chars_of(s);
  size_t e = cs.size();
  while (e > 0) {
    while (e > 0 && is_space(cs[e - 1].cp)) --e;
    if (e == 0) break;
    if (int64_t(out.size()) >= maxsplit) {  // the rest, leading whitespace included
      out.insert(out.begin(), s.substr(0, cs[e - 1].end));
      break;
    }
    size_t b = e;
    while (b > 0 && !is_space(cs[b - 1].cp)) --b;
    out.insert(out.begin(), s.substr(cs[b].begin, cs[e - 1].end - cs[b].begin));
    e = b;
  }
  return out;
}

std::vector<std::string> splitlines(const std::string& s, bool keepends) {
  std::vector<std::string> out;
  const std::vector<Char> cs = chars_of(s);
  size_t start = 0;
  for (size_t i = 0; i < cs.size(); ++i) {
    const uint32_t cp = cs[i].cp;
    const bool brk = cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || cp == 0x1c || cp == 0x1d || cp == 0x1e ||
                     cp == 0x85 || cp == 0x2028 || cp == 0x2029;
    if (!brk) continue;
    const size_t line_end = cs[i].begin;
    size_t end = cs[i].end;
    if (cp == '\r' && i + 1 < cs.size() && cs[i + 1].cp == '\n') end = cs[++i].end;
    out.push_back(s.substr(start, (keepends ? end : line_end) - start));
    start = end;
  }
  if (start < s.size()) out.push_back(s.substr(start));
  return out;
}

std::string replace(const std::string& s, const std::string& old, const std::string& with, int64_t count) {
  std::string out;
  int64_t done = 0;
  if (old.empty()) {  // Python inserts `with` before every character and at the end
    const std::vector<Char> cs = chars_of(s);
    for (const Char& c : cs) {
      if (count < 0 || done < count) {
        out += with;
        ++done;
      }
      out.append(s, c.begin, c.end - c.begin);
    }
    if (count < 0 || done < count) out += with;
    return out;
  }
  size_t start = 0;
  for (;;) {
    const size_t at = (count >= 0 && done >= count) ? std::string::npos : s.find(old, start);
    if (at == std::string::npos) break;
    out.append(s, start, at - start);
    out += with;
    start = at + old.size();
    ++done;
  }
  out.append(s, start, std::string::npos);
  return out;
}

uint64_t replaced_size(const std::string& s, const std::string& old, const std::string& with, int64_t count) {
  uint64_t n = old.empty() ? length(s) + 1 : uint64_t(text::count(s, old));
  if (count >= 0) n = std::min(n, uint64_t(count));
  const unsigned __int128 size = (unsigned __int128)(s.size()) - n * old.size() + (unsigned __int128)(n) * with.size();
  return size > UINT64_MAX ? UINT64_MAX : uint64_t(size);
}

std::string upper(std::string s) {
  for (char& c : s) c = to_upper(c);
  return s;
}

std::string lower(std::string s) {
  for (char& c : s) c = to_lower(c);
  return s;
}

std::string capitalize(const std::string& s) {
  std::string out = lower(s);
  if (!out.empty()) out[0] = to_upper(out[0]);
  return out;
}

// str.title(): a letter is upper-cased when the character before it is not a cased letter.
std::string title(const std::string& s) {
  std::string out = s;
  bool prev_cased = false;
  for (char& c : out) {
    const bool letter = is_upper_ascii(c) || is_lower_ascii(c);
    if (letter) c = prev_cased ? to_lower(c) : to_upper(c);
    prev_cased = letter || static_cast<unsigned char>(c) >= 0x80;
  }
  return out;
}

std::string jinja_title(const std::string& s) {
  std::string out = s;
  bool word_start = true;
  for (char& c : out) {
    const bool boundary = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || c == ' ' || c == '\t' ||
                          c == '\n' || c == '\r' || c == '\f' || c == '\v';
    if (boundary) {
      word_start = true;
      continue;
    }
    c = word_start ? to_upper(c) : to_lower(c);
    word_start = false;
  }
  return out;
}

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// digit (_? digit)* at s[*i], appended to *out without underscores.
bool digit_part(const std::string& s, size_t* i, std::string* out) {
  if (*i >= s.size() || !is_digit(s[*i])) return false;
  for (;;) {
    *out += s[(*i)++];
    if (*i < s.size() && is_digit(s[*i])) continue;
    if (*i + 1 < s.size() && s[*i] == '_' && is_digit(s[*i + 1])) {
      ++*i;
      continue;
    }
    return true;
  }
}

bool equals_ignoring_case(const std::string& s, size_t from, std::string_view word) {
  if (s.size() - from != word.size()) return false;
  for (size_t k = 0; k < word.size(); ++k) {
    if (to_lower(s[from + k]) != word[k]) return false;
  }
  return true;
}

}  // namespace

std::optional<std::string> int_literal(const std::string& s) {
  std::string out;
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) out += s[i++];
  if (!digit_part(s, &i, &out) || i != s.size()) return std::nullopt;
  return out;
}

std::optional<std::string> float_literal(const std::string& s) {
  std::string out;
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) out += s[i++];
  if (equals_ignoring_case(s, i, "inf") || equals_ignoring_case(s, i, "infinity") || equals_ignoring_case(s, i, "nan")) {
    return out + s.substr(i);
  }
  const bool whole = digit_part(s, &i, &out);
  bool fraction = false;
  if (i < s.size() && s[i] == '.') {
    out += s[i++];
    fraction = digit_part(s, &i, &out);
  }
  if (!whole && !fraction) return std::nullopt;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    out += s[i++];
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) out += s[i++];
    if (!digit_part(s, &i, &out)) return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  return out;
}

namespace {

bool is_word_char(uint32_t cp) {
  if (cp < 0x80) return cp == '_' || is_digit(char(cp)) || is_upper_ascii(char(cp)) || is_lower_ascii(char(cp));
  if (cp < 0x100) {  // Latin-1: the letters, and ª ² ³ µ ¹ º ¼ ½ ¾ (Python's isalnum)
    return (cp >= 0xc0 && cp != 0xd7 && cp != 0xf7) || cp == 0xaa || cp == 0xb2 || cp == 0xb3 || cp == 0xb5 ||
           cp == 0xb9 || cp == 0xba || (cp >= 0xbc && cp <= 0xbe);
  }
  static const std::pair<uint32_t, uint32_t> kNotWord[] = {
      {0x2000, 0x206f}, {0x2190, 0x245f}, {0x2500, 0x2775}, {0x2794, 0x2bff}, {0x2e00, 0x2e2e}, {0x2e30, 0x2e7f},
      {0x3000, 0x3004}, {0x3008, 0x3020}, {0x3030, 0x3030}, {0x30fb, 0x30fb}, {0xfe30, 0xfe4f},
      {0xff01, 0xff0f}, {0xff1a, 0xff20}, {0xff3b, 0xff40}, {0xff5b, 0xff65}, {0x1f000, 0x1faff}};
  for (const auto& [lo, hi] : kNotWord) {
    if (cp >= lo && cp <= hi) return false;
  }
  return !is_space(cp);
}

}  // namespace

size_t word_count(const std::string& s) {
  size_t words = 0;
  bool in_word = false;
  for (const Char& c : chars_of(s)) {
    const bool word = is_word_char(c.cp);
    words += word && !in_word;
    in_word = word;
  }
  return words;
}

size_t length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

int64_t count(const std::string& s, const std::string& sub) {
  if (sub.empty()) return int64_t(length(s)) + 1;
  int64_t n = 0;
  for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
  return n;
}

size_t find(const std::string& s, const std::string& sub, bool from_right) {
  return from_right ? s.rfind(sub) : s.find(sub);
}

std::string char_at(const std::string& s, size_t i) {
  size_t begin = 0;
  for (size_t seen = 0; begin < s.size(); ++begin) {
    if ((static_cast<unsigned char>(s[begin]) & 0xC0) == 0x80) continue;
    if (seen++ == i) break;
  }
  size_t end = begin + 1;
  while (end < s.size() && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) ++end;
  return s.substr(begin, end - begin);
}

size_t byte_offset(const std::string& s, size_t i) {
  size_t seen = 0;
  for (size_t b = 0; b < s.size(); ++b) {
    if ((static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) continue;
    if (seen++ == i) return b;
  }
  return s.size();
}

int64_t char_index(const std::string& s, size_t byte_offset) { return int64_t(length(s.substr(0, byte_offset))); }

}  // namespace attnzoo::chat::text
