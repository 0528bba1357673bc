#pragma once
// The streaming tests' cuts of a fixed answer: every two-piece split and, where the answer is short, every
// three-piece split, so that each marker, name and value is cut at every byte and at every pair of bytes (the
// tool-call streams, harmony's reader, and the response chunks built on them).
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace attnzoo::testing {

// f(pieces, where): the text cut into `pieces` at the offsets `where` names ("at 3", "at 3, 7").
template <class F>
void for_each_split(std::string_view text, size_t three_up_to, F&& f) {
  for (size_t a = 0; a <= text.size(); ++a)
    f(std::vector<std::string>{std::string(text.substr(0, a)), std::string(text.substr(a))},
      "at " + std::to_string(a));
  if (text.size() > three_up_to) return;
  for (size_t a = 0; a <= text.size(); ++a)
    for (size_t b = a; b <= text.size(); ++b)
      f(std::vector<std::string>{std::string(text.substr(0, a)), std::string(text.substr(a, b - a)),
                                 std::string(text.substr(b))},
        "at " + std::to_string(a) + ", " + std::to_string(b));
}

// The text a byte at a time, and in random pieces of 0 to `max_piece` - 1 bytes (empty pushes included).
inline std::vector<std::vector<std::string>> bytes_and_random_pieces(std::string_view text, std::mt19937& rng,
                                                                     size_t max_piece = 64) {
  std::vector<std::string> bytes, pieces;
  for (char ch : text) bytes.push_back(std::string(1, ch));
  for (size_t at = 0; at < text.size(); at += pieces.back().size())
    pieces.push_back(std::string(text.substr(at, rng() % max_piece)));
  return {bytes, pieces};
}

}  // namespace attnzoo::testing
