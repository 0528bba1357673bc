#include "engine/json_string_length.h"

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "engine/json_schema_pointer.h"

namespace attnzoo {
namespace {

constexpr uint32_t kUnbounded = 0xFFFFFFFF;

bool begins_character(int byte) { return byte < 0x80 || byte >= 0xC0; }

}  // namespace

bool StringLengths::viable(uint16_t state, uint32_t len) const {
  if (max != kUnbounded && len > max) return false;
  const uint32_t lo = len >= min ? 0 : min - len;
  const uint32_t hi = max == kUnbounded ? top : std::min<uint32_t>(top, max - len);
  if (lo > hi) return false;
  const uint64_t* row = bits.data() + size_t(state) * words;
  for (uint32_t w = lo / 64; w <= hi / 64; ++w) {
    uint64_t word = row[w];
    if (w == lo / 64) word &= ~uint64_t(0) << (lo % 64);
    if (w == hi / 64 && hi % 64 != 63) word &= (uint64_t(1) << (hi % 64 + 1)) - 1;
    if (word) return true;
  }
  return false;
}

StringLengths string_lengths(const StringPattern& p, uint32_t min, uint32_t max, const std::string& pointer) {
  const auto refuse = [&](const std::string& what) { json_schema_at::refuse(pointer, what); };
  const size_t states = p.next.size();
  StringLengths out;
  out.min = min, out.max = max;
  const uint64_t top = std::min<uint64_t>(max, uint64_t(min) + states);
  if ((top + 1) * states > StringLengths::kMaxBits)
    refuse("minLength / maxLength beside pattern / format: " + std::to_string(states) + " DFA states times " +
           std::to_string(top + 1) + " lengths is past " + std::to_string(StringLengths::kMaxBits) +
           " (lower minLength, or maxLength nearer it)");
  out.top = uint32_t(top);
  out.words = size_t(top / 64 + 1);
  out.bits.assign(states * out.words, 0);

  // Each state's distinct moves (the next state, and whether the byte begins a character), and an order in which
  // a state comes after every state its continuation bytes lead to (those moves stay at the same k; a character
  // has at most three of them, so they form no loop).
  std::vector<std::vector<std::pair<uint16_t, bool>>> moves(states);
  for (size_t s = 0; s < states; ++s) {
    for (int b = 0; b < 256; ++b) {
      const uint16_t t = p.next[s][b];
      if (t == StringPattern::kDead) continue;
      const std::pair<uint16_t, bool> m{t, begins_character(b)};
      if (std::find(moves[s].begin(), moves[s].end(), m) == moves[s].end()) moves[s].push_back(m);
    }
  }
  std::vector<uint16_t> order;
  std::vector<uint8_t> seen(states, 0);
  const auto visit = [&](auto&& self, uint16_t s) -> void {
    if (seen[s]) return;
    seen[s] = 1;
    for (const auto& [t, begins] : moves[s])
      if (!begins) self(self, t);
    order.push_back(s);
  };
  for (size_t s = 0; s < states; ++s) visit(visit, uint16_t(s));

  const auto get = [&](size_t s, uint64_t k) { return (out.bits[s * out.words + k / 64] >> (k % 64)) & 1; };
  for (uint64_t k = 0; k <= top; ++k) {
    for (uint16_t s : order) {
      bool reach = k == 0 && p.accepting[s];
      for (const auto& [t, begins] : moves[s]) {
        if (reach) break;
        reach = begins ? k > 0 && get(t, k - 1) : get(t, k);
      }
      if (reach) out.bits[s * out.words + k / 64] |= uint64_t(1) << (k % 64);
    }
  }
  if (!out.viable(p.start, 0))
    refuse("no string of " + std::to_string(min) + " to " +
           (max == kUnbounded ? std::string("any number of") : std::to_string(max)) +
           " characters matches the pattern / format");
  return out;
}

}  // namespace attnzoo
