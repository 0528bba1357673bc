#pragma once
// The byte mutator of the in-tree fuzz tests (loader and tokenizer): bit flips, byte edits, insertions,
// deletions, truncation, span copies, extreme numbers and, for safetensors, header-length edits. Seeded, so an
// iteration number reproduces its input.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace attnzoo::fuzzing {

using Bytes = std::vector<uint8_t>;

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  size_t below(size_t n) { return n ? size_t(rng_() % n) : 0; }

  uint8_t interesting_byte() {
    static const uint8_t kBytes[] = {0, 1, 0x7f, 0x80, 0xbf, 0xc3, 0xed, 0xf4, 0xff, '"', '\\', '{', '}', '[',
                                     ']', ',', ':', '-', '.', 'e', '0', '9', 'u', ' ', '\n'};
    return rng_() % 3 ? kBytes[below(sizeof kBytes)] : uint8_t(rng_());
  }

  void mutate(Bytes& b, bool is_safetensors) {
    int n = 1 + int(below(4));
    for (int i = 0; i < n; ++i) {
      switch (below(is_safetensors ? 9 : 8)) {
        case 0:  // bit flip
          if (!b.empty()) b[below(b.size())] ^= uint8_t(1u << below(8));
          break;
        case 1:  // byte overwrite
          if (!b.empty()) b[below(b.size())] = interesting_byte();
          break;
        case 2: {  // insertion
          size_t at = below(b.size() + 1), len = 1 + below(8);
          Bytes ins(len);
          for (auto& c : ins) c = interesting_byte();
          b.insert(b.begin() + long(at), ins.begin(), ins.end());
          break;
        }
        case 3: {  // deletion
          if (b.empty()) break;
          size_t at = below(b.size()), len = 1 + below(std::min<size_t>(16, b.size() - at));
          b.erase(b.begin() + long(at), b.begin() + long(at + len));
          break;
        }
        case 4:  // truncation
          b.resize(below(b.size() + 1));
          break;
        case 5: {  // duplicate a span elsewhere
          if (b.empty()) break;
          size_t from = below(b.size()), len = 1 + below(std::min<size_t>(32, b.size() - from));
          Bytes span(b.begin() + long(from), b.begin() + long(from + len));
          size_t at = below(b.size() + 1);
          b.insert(b.begin() + long(at), span.begin(), span.end());
          break;
        }
        case 6:    // replace a number with an extreme one
        case 7: {  // (twice as likely: numbers carry shapes and offsets)
          static const char* kNumbers[] = {"0", "-1", "1", "7", "4294967296", "9223372036854775807",
                                           "18446744073709551615", "1e308", "1e999", "-0", "2.5", "99999999999"};
          size_t at = below(b.size());
          while (at < b.size() && !(b[at] >= '0' && b[at] <= '9')) ++at;
          if (at >= b.size()) break;
          size_t end = at;
          while (end < b.size() && b[end] >= '0' && b[end] <= '9') ++end;
          std::string num = kNumbers[below(std::size(kNumbers))];
          b.erase(b.begin() + long(at), b.begin() + long(end));
          b.insert(b.begin() + long(at), num.begin(), num.end());
          break;
        }
        case 8: {  // header length field
          if (b.size() < 8) break;
          uint64_t n;
          std::memcpy(&n, b.data(), 8);
          switch (below(4)) {
            case 0: n += below(17) - 8; break;
            case 1: n = rng_(); break;
            case 2: n = b.size() - 8 + below(3); break;
            default: n = uint64_t(1) << below(64); break;
          }
          std::memcpy(b.data(), &n, 8);
          break;
        }
      }
    }
  }

  // Keeps the length field consistent with an edited header, so mutations reach the entry validation.
  static void fix_header_length(Bytes& b, size_t header_len) {
    uint64_t n = header_len;
    std::memcpy(b.data(), &n, 8);
  }

 private:
  std::mt19937_64 rng_;
};

}  // namespace attnzoo::fuzzing
