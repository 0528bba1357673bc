// Added-token matching: leftmost-longest, as Hugging Face's Aho-Corasick reports it, and linear in the text
// whatever the tokens (a 10k-byte token used to make encoding quadratic).
#include "tokenizer/added_tokens.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <random>

#include "tokenizer/tokenizer.h"

namespace attnzoo::tok {
namespace {

// The definition: at the leftmost start >= from where some pattern matches, the longest one (first listed on a
// tie of equal strings).
TokenMatcher::Match brute_force(const std::vector<std::string>& patterns, std::string_view text, size_t from) {
  for (size_t s = from; s < text.size(); ++s) {
    TokenMatcher::Match best{std::string_view::npos, 0, -1};
    for (size_t p = 0; p < patterns.size(); ++p) {
      const std::string& pat = patterns[p];
      if (pat.empty() || text.substr(s, pat.size()) != pat) continue;
      if (best.value < 0 || s + pat.size() > best.end) best = {s, s + pat.size(), int32_t(p)};
    }
    if (best.value >= 0) return best;
  }
  return {std::string_view::npos, 0, -1};
}

TEST(AddedTokens, MatcherIsLeftmostLongestOnRandomInputs) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<std::string> patterns;
    const int n = 1 + int(rng() % 6);
    for (int i = 0; i < n; ++i) {
      std::string p;
      const int len = 1 + int(rng() % 5);
      for (int j = 0; j < len; ++j) p += char('a' + rng() % 3);
      patterns.push_back(p);
    }
    TokenMatcher m;
    for (size_t i = 0; i < patterns.size(); ++i) m.add(patterns[i], int32_t(i));
    m.finish();
    std::string text;
    const int len = int(rng() % 40);
    for (int j = 0; j < len; ++j) text += char('a' + rng() % 3);
    const TokenMatcher::Scan scan = m.scan(text);
    for (size_t from = 0; from <= text.size(); ++from) {
      const TokenMatcher::Match got = scan.find(from), want = brute_force(patterns, text, from);
      ASSERT_EQ(got.start, want.start) << text << " from " << from;
      if (want.value < 0) continue;
      ASSERT_EQ(got.end, want.end) << text << " from " << from;
      // Equal strings listed twice: the first listed wins.
      EXPECT_EQ(patterns[size_t(got.value)], patterns[size_t(want.value)]);
      EXPECT_LE(got.value, want.value);
    }
  }
}

// A tokenizer whose one added token is `length` a's then "b", over a BPE that merges "a a".
std::shared_ptr<const Tokenizer> long_token_tokenizer(size_t length) {
  const std::string json = R"({"added_tokens": [{"id": 3, "content": ")" + std::string(length, 'a') +
                           R"(b", "special": false, "normalized": false, "single_word": false, "lstrip": false,
                           "rstrip": false}],
    "normalizer": null, "pre_tokenizer": null, "post_processor": null, "decoder": null,
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "aa": 2}, "merges": ["a a"]}})";
  return Tokenizer::from_json(json, "long.json");
}

TEST(AddedTokens, LongTokenKeepsEncodingLinear) {
  // Matching the token by comparing it at every position costs text x token length (about 40 s here for these
  // sizes, before the automaton); linear matching costs the same whatever the token's length. So the check is a
  // ratio measured side by side, not a time: a token 4x longer must not make encoding the same text ~4x slower.
  // The fastest of three alternated runs each, so that a busy machine (sanitizer builds, CI) cannot fake it.
  constexpr size_t kShort = 2500, kLong = 10000;
  const std::string text(200000, 'a');
  const auto shorter = long_token_tokenizer(kShort), longer = long_token_tokenizer(kLong);
  auto seconds = [&](const Tokenizer& t, size_t length) {
    const std::string input = text + std::string(length, 'a') + "b" + "a";
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<int32_t> ids = t.encode(input, false);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // The text's a's in pairs, then the token, then the last a.
    EXPECT_EQ(ids.size(), text.size() / 2 + 1 + 1);
    EXPECT_EQ(ids[0], 2);
    EXPECT_EQ(ids[text.size() / 2], 3);
    EXPECT_EQ(ids.back(), 0);
    return s;
  };
  double best_short = 1e30, best_long = 1e30;
  for (int round = 0; round < 3; ++round) {
    best_short = std::min(best_short, seconds(*shorter, kShort));
    best_long = std::min(best_long, seconds(*longer, kLong));
  }
  EXPECT_LT(best_long, 2.0 * best_short) << "encoding with a token of " << kLong << " bytes took " << best_long
                                         << " s against " << best_short << " s with one of " << kShort;
}

}  // namespace
}  // namespace attnzoo::tok
