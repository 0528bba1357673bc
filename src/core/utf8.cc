#include "core/utf8.h"

namespace attnzoo::utf8 {
namespace {

// The range the second byte must lie in for a lead byte (Unicode Table 3-7); 0 length for invalid leads.
struct LeadInfo {
  size_t length;
  unsigned char lo, hi;
};

LeadInfo lead_info(unsigned char b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};  // excludes surrogates
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};  // <= U+10FFFF
  return {0, 0, 0};
}

// How many bytes from i match a valid sequence's pattern (stops at the first mismatch or the end of s).
size_t matched_prefix(std::string_view s, size_t i, const LeadInfo& info) {
  size_t n = 1;
  while (n < info.length && i + n < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i + n]);
    const bool ok = n == 1 ? (c >= info.lo && c <= info.hi) : (c >= 0x80 && c <= 0xBF);
    if (!ok) break;
    ++n;
  }
  return n;
}

}  // namespace

size_t decode(std::string_view s, size_t i, uint32_t* cp) {
  const unsigned char b = static_cast<unsigned char>(s[i]);
  const LeadInfo info = lead_info(b);
  if (info.length == 0) return 0;
  if (info.length == 1) {
    *cp = b;
    return 1;
  }
  if (matched_prefix(s, i, info) != info.length) return 0;
  uint32_t v = b & (0x7F >> info.length);
  for (size_t k = 1; k < info.length; ++k) v = (v << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  *cp = v;
  return info.length;
}

size_t invalid_length(std::string_view s, size_t i) {
  const LeadInfo info = lead_info(static_cast<unsigned char>(s[i]));
  if (info.length == 0) return 1;
  return matched_prefix(s, i, info);
}

void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

bool is_valid(std::string_view s) {
  uint32_t cp;
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = decode(s, i, &cp);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  uint32_t cp;
  for (size_t i = 0; i < s.size();) {
    const size_t n = decode(s, i, &cp);
    if (n) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      append(out, kReplacement);
      i += invalid_length(s, i);
    }
  }
  return out;
}

size_t incomplete_tail(std::string_view s) {
  // A sequence is at most 4 bytes, so only a lead byte among the last 3 can start an unfinished one.
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const size_t i = s.size() - back;
    const unsigned char b = static_cast<unsigned char>(s[i]);
    if (b >= 0x80 && b <= 0xBF) continue;  // continuation byte: keep looking for its lead
    const LeadInfo info = lead_info(b);
    if (info.length <= back) return 0;  // ASCII, invalid lead, or a sequence that already had room to finish
    return matched_prefix(s, i, info) == back ? back : 0;
  }
  return 0;
}

}  // namespace attnzoo::utf8
