#include "tokenizer/merges_from_scores.h"

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <unordered_map>

#include "core/utf8.h"

namespace attnzoo::tok {

std::vector<std::pair<std::string, std::string>> merges_from_scores(const std::vector<std::string>& tokens,
                                                                    const std::vector<float>& scores) {
  std::unordered_map<std::string_view, size_t> last;  // token -> its last index (its id and its score)
  last.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) last.insert_or_assign(tokens[i], i);

  struct Candidate {
    std::string_view left, right;
    float score;
    size_t left_chars, right_chars;
    size_t left_id, right_id;
  };
  std::vector<Candidate> all, local;
  std::unordered_map<std::string_view, bool> seen;
  seen.reserve(tokens.size());
  for (const std::string& token : tokens) {
    if (!seen.emplace(token, true).second) continue;
    const float score = scores[last.at(token)];
    local.clear();
    size_t chars = 0;
    size_t total_chars = 0;
    for (unsigned char b : token) total_chars += (b & 0xC0) != 0x80;
    for (size_t cut = 0; cut < token.size();) {
      cut += utf8::char_length(static_cast<unsigned char>(token[cut]));
      ++chars;
      if (cut >= token.size()) break;
      const std::string_view left(token.data(), cut), right(token.data() + cut, token.size() - cut);
      const auto l = last.find(left), r = last.find(right);
      if (l != last.end() && r != last.end())
        local.push_back({left, right, score, chars, total_chars - chars, l->second, r->second});
    }
    std::stable_sort(local.begin(), local.end(), [](const Candidate& a, const Candidate& b) {
      return a.left_id != b.left_id ? a.left_id < b.left_id : a.right_id < b.right_id;
    });
    all.insert(all.end(), local.begin(), local.end());
  }
  std::stable_sort(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.left_chars != b.left_chars) return a.left_chars > b.left_chars;
    return a.right_chars > b.right_chars;
  });
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(all.size());
  for (const Candidate& c : all) merges.emplace_back(std::string(c.left), std::string(c.right));
  return merges;
}

}  // namespace attnzoo::tok
