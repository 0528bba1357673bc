#include "tokenizer/unicode.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "core/utf8.h"

namespace attnzoo::tok::unicode {
namespace {

#include "tokenizer/unicode_tables.inc"

// Hangul syllable arithmetic (Unicode 3.12).
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

template <size_t N, size_t W>
const uint32_t* find_row(const uint32_t (&table)[N][W], uint32_t cp) {
  const auto* end = table + N;
  const auto* it = std::lower_bound(table, end, cp, [](const uint32_t(&row)[W], uint32_t v) { return row[0] < v; });
  return it != end && (*it)[0] == cp ? *it : nullptr;
}

const std::unordered_map<uint64_t, uint32_t>& compositions() {
  static const auto* map = [] {
    auto* m = new std::unordered_map<uint64_t, uint32_t>();
    for (const auto& row : kComposition) (*m)[uint64_t(row[0]) << 21 | row[1]] = row[2];
    return m;
  }();
  return *map;
}

void decompose_into(uint32_t cp, bool compat, std::vector<uint32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  if (cp < 0xC0) {  // nothing below U+00C0 has a canonical mapping; compat ones are in the table
    if (!compat || cp < 0xA0) {
      out.push_back(cp);
      return;
    }
  }
  if (compat) {
    if (const uint32_t* row = find_row(kCompatIndex, cp)) {
      out.insert(out.end(), kCompatPool + row[1], kCompatPool + row[1] + row[2]);
      return;
    }
  }
  if (const uint32_t* row = find_row(kCanonicalIndex, cp)) {
    out.insert(out.end(), kCanonicalPool + row[1], kCanonicalPool + row[1] + row[2]);
    return;
  }
  out.push_back(cp);
}

uint32_t compose_pair(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  const auto& m = compositions();
  const auto it = m.find(uint64_t(a) << 21 | b);
  return it == m.end() ? 0 : it->second;
}

// Stable sort of each run of non-starters by combining class (the canonical ordering algorithm).
void canonical_order(std::vector<uint32_t>& cps) {
  for (size_t i = 0; i < cps.size();) {
    if (combining_class(cps[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < cps.size() && combining_class(cps[j]) != 0) ++j;
    std::stable_sort(cps.begin() + long(i), cps.begin() + long(j),
                     [](uint32_t a, uint32_t b) { return combining_class(a) < combining_class(b); });
    i = j;
  }
}

void compose(std::vector<uint32_t>& cps) {
  if (cps.empty()) return;
  size_t starter = 0;
  int last_class = combining_class(cps[0]) ? 256 : 0;  // a leading non-starter blocks composition
  size_t write = 1;
  for (size_t read = 1; read < cps.size(); ++read) {
    const uint32_t ch = cps[read];
    const int cls = combining_class(ch);
    const uint32_t composite = last_class < cls || last_class == 0 ? compose_pair(cps[starter], ch) : 0;
    if (composite) {
      cps[starter] = composite;
      continue;
    }
    if (cls == 0) starter = write;
    last_class = cls;
    cps[write++] = ch;
  }
  cps.resize(write);
}

}  // namespace

uint8_t combining_class(uint32_t cp) {
  if (cp < 0x300) return 0;
  const uint32_t* row = find_row(kCombiningClass, cp);
  return row ? uint8_t(row[1]) : 0;
}

std::string normalize(std::string_view text, Form form) {
  // Fast path: ASCII is invariant under every form, and nothing below U+0300 changes under NFC.
  const uint32_t bound = form == Form::nfc ? 0x300 : 0x80;
  std::vector<uint32_t> cps;
  cps.reserve(text.size());
  bool changed_possible = false;
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t n = utf8::decode(text, i, &cp);
    i += n ? n : 1;
    if (cp >= bound) changed_possible = true;
    cps.push_back(cp);
  }
  if (!changed_possible) return std::string(text);
  const bool compat = form == Form::nfkc || form == Form::nfkd;
  std::vector<uint32_t> decomposed;
  decomposed.reserve(cps.size() + cps.size() / 4);
  for (uint32_t cp : cps) decompose_into(cp, compat, decomposed);
  canonical_order(decomposed);
  if (form == Form::nfc || form == Form::nfkc) compose(decomposed);
  std::string out;
  out.reserve(text.size());
  for (uint32_t cp : decomposed) utf8::append(out, cp);
  return out;
}

std::string lowercase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t n = utf8::decode(text, i, &cp);
    if (cp < 0x80) {
      out += char(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
    } else if (const uint32_t* row = find_row(kLowerIndex, cp)) {
      for (uint32_t k = 0; k < row[2]; ++k) utf8::append(out, kLowerPool[row[1] + k]);
    } else {
      out.append(text.substr(i, n ? n : 1));
    }
    i += n ? n : 1;
  }
  return out;
}

bool is_white_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

}  // namespace attnzoo::tok::unicode
