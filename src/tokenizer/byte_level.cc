#include "tokenizer/byte_level.h"

#include <array>

#include "core/utf8.h"

namespace attnzoo::tok::byte_level {
namespace {

struct Tables {
  std::array<uint32_t, 256> char_of{};
  std::array<std::string, 256> utf8_of;
  std::array<int16_t, 256 + 68> byte_of;  // every mapped character is below U+0144
  Tables() {
    byte_of.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      char_of[size_t(b)] = printable ? uint32_t(b) : next++;
      utf8::append(utf8_of[size_t(b)], char_of[size_t(b)]);
      byte_of[char_of[size_t(b)]] = int16_t(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

uint32_t char_for_byte(uint8_t b) { return tables().char_of[b]; }

int byte_for_char(uint32_t cp) {
  return cp < 256 + 68 ? tables().byte_of[cp] : -1;
}

std::string encode(std::string_view bytes) {
  const auto& t = tables();
  std::string out;
  out.reserve(bytes.size() + bytes.size() / 2);
  for (unsigned char b : bytes) out += t.utf8_of[b];
  return out;
}

bool decode_token(std::string_view token, std::string& out) {
  const size_t start = out.size();
  uint32_t cp;
  for (size_t i = 0; i < token.size();) {
    const size_t n = utf8::decode(token, i, &cp);
    const int b = n ? byte_for_char(cp) : -1;
    if (b < 0) {
      out.resize(start);
      return false;
    }
    out += char(b);
    i += n;
  }
  return true;
}

}  // namespace attnzoo::tok::byte_level
