// The per-DFA-state token sets inside patterned / formatted strings (engine/json_pattern_tokens.h) give exactly
// the mask of the trie walk and of pushing every token through the recognizer: at every reachable (DFA state,
// characters so far) of several patterns, with and without length bounds, and along random walks of tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/json_constraint.h"
#include "engine/json_schema.h"
#include "engine/json_schema_recognizer.h"
#include "engine/json_sequence.h"
#include "loader/json.h"

namespace attnzoo {
namespace {

// Every byte alone, then tokens as a BPE vocabulary holds them around patterned strings: letters, digits, dashes,
// colons, spaces, multi-byte characters, and quotes that close the string and go on (`",`, `"}`, `"x`).
std::vector<std::string> vocabulary() {
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) v.push_back(std::string(1, char(b)));
  v.push_back("");  // never allowed
  const std::vector<std::string> alphabet = {"a", "b", "Z", "Q", "e", "f", "0", "1", "9", "-", ":", "T", " ",
                                              ".", "@", "\"", ",", "}", "\xc3\xa9", "\xe4\xb8\xad", "+", "x"};
  std::mt19937 rng(11);
  for (int i = 0; i < 4000; ++i) {
    std::string t;
    const int len = 1 + int(rng() % 7);
    for (int k = 0; k < len; ++k) t += alphabet[rng() % alphabet.size()];
    v.push_back(t);
  }
  return v;
}

std::vector<uint8_t> pushed(const JsonSchemaRecognizer& state, const std::vector<std::string>& vocab) {
  std::vector<uint8_t> want(vocab.size(), 0);
  for (size_t id = 0; id < vocab.size(); ++id) {
    JsonSchemaRecognizer r = state;
    want[id] = !vocab[id].empty() && r.push(vocab[id]);
  }
  return want;
}

// A schema whose property "s" is the string under test, followed by another property (so a quote may go on).
std::shared_ptr<const JsonSchema> string_schema(const std::string& s) {
  return compile_json_schema(json::parse(R"({"type": "object", "properties": {"s": )" + s +
                                                R"(, "n": {"type": "integer"}}, "required": ["s", "n"]})"));
}

struct PatternCase {
  std::string schema;
  const char* name;
};
const PatternCase kCases[] = {
    {R"({"type": "string", "pattern": "^[A-Za-z ]+$"})", "broad class, anchored"},
    {R"({"type": "string", "pattern": "^[A-Za-z ]+$", "minLength": 3, "maxLength": 12})", "broad class, lengths"},
    {R"({"type": "string", "pattern": "^(ab|ba)*x?$", "minLength": 2, "maxLength": 9})", "alternation, lengths"},
    {R"({"type": "string", "pattern": "fo+|\u00e9\\d{2}"})", "unanchored alternation"},
    {R"({"type": "string", "pattern": "^([a-z]|\u00e9|\u4e2d)+$", "maxLength": 5})", "multi-byte characters"},
    {R"({"type": "string", "pattern": "^[^\"]{0,3}:\\d+$"})", "negated class"},
    {R"({"type": "string", "format": "date"})", "date"},
    {R"({"type": "string", "format": "uuid", "minLength": 36})", "uuid"},
    {R"({"type": "string", "format": "time"})", "time"},
    {R"({"type": "string", "format": "ipv4", "maxLength": 11})", "ipv4, maxLength"},
};

TEST(PatternTokens, EveryReachableStateMasksAsTheWalkAndThePushDo) {
  const auto vocab = vocabulary();
  TokenTrie sets(vocab), walk(vocab);
  walk.use_pattern_sets(false);
  for (const PatternCase& c : kCases) {
    SCOPED_TRACE(c.name);
    const auto schema = string_schema(c.schema);
    JsonSchemaRecognizer start(*schema);
    ASSERT_TRUE(start.push(std::string_view(R"({"s": ")")));
    // Breadth first over single bytes: every (DFA state, characters so far) a prefix reaches, each once.
    std::map<std::pair<uint16_t, uint32_t>, JsonSchemaRecognizer> seen;
    std::vector<JsonSchemaRecognizer> todo{start};
    while (!todo.empty() && seen.size() < 400) {
      const JsonSchemaRecognizer r = todo.back();
      todo.erase(todo.end() - 1);
      const auto text = r.pattern_text();
      ASSERT_NE(text.pattern, nullptr);
      const uint32_t len = text.lengths ? text.len : 0;  // without a bound the characters do not matter
      if (!seen.emplace(std::pair{text.state, len}, r).second) continue;
      for (int b = 0; b < 256; ++b) {
        JsonSchemaRecognizer next = r;
        if (b != '"' && next.push(uint8_t(b))) todo.insert(todo.begin(), next);
      }
    }
    EXPECT_GT(seen.size(), 2u);
    std::vector<uint8_t> got, old;
    for (const auto& [key, r] : seen) {
      const std::vector<uint8_t> want = pushed(r, vocab);
      const int64_t n = sets.allowed(r, got);
      walk.allowed(r, old);
      ASSERT_EQ(got, want) << "DFA state " << key.first << ", " << key.second << " characters";
      ASSERT_EQ(old, want);
      EXPECT_EQ(n, std::count(want.begin(), want.end(), 1));
    }
  }
  EXPECT_GT(sets.pattern_set_bytes(), 0u);
}

TEST(PatternTokens, RandomWalksOfTokensMaskAsThePushDoes) {
  const auto vocab = vocabulary();
  const TokenTrie trie(vocab);
  std::mt19937 rng(5);
  int pattern_states = 0;
  for (const PatternCase& c : kCases) {
    SCOPED_TRACE(c.name);
    const auto schema = string_schema(c.schema);
    for (int round = 0; round < 6; ++round) {
      JsonSchemaRecognizer r(*schema);
      std::vector<uint8_t> got;
      for (int step = 0; step < 40 && !r.complete(); ++step) {
        const std::vector<uint8_t> want = pushed(r, vocab);
        trie.allowed(r, got);
        ASSERT_EQ(got, want) << "step " << step;
        pattern_states += r.pattern_text().pattern != nullptr;
        std::vector<size_t> ids;
        for (size_t id = 0; id < want.size(); ++id)
          if (want[id]) ids.push_back(id);
        if (ids.empty()) break;
        ASSERT_TRUE(r.push(vocab[ids[rng() % ids.size()]]));
      }
    }
  }
  EXPECT_GT(pattern_states, 100);
}

TEST(PatternTokens, SequencesTakeTheSetsInsideADocument) {
  const auto vocab = vocabulary();
  const TokenTrie trie(vocab);
  const auto schema = compile_json_schema(json::parse(R"({"type": "string", "format": "date"})"));
  const JsonSequence sequence{"\n", "", 0};
  JsonSequenceRecognizer r(*schema, &sequence);
  const std::string text = "\"2024-02-29\"\n\"1999-1";
  std::vector<uint8_t> got;
  for (size_t i = 0; i <= text.size(); ++i) {
    std::vector<uint8_t> want(vocab.size(), 0);
    for (size_t id = 0; id < vocab.size(); ++id) {
      JsonSequenceRecognizer next = r;
      want[id] = !vocab[id].empty() && next.push(vocab[id]);
    }
    trie.allowed(r, got);
    ASSERT_EQ(got, want) << text.substr(0, i);
    if (i < text.size()) ASSERT_TRUE(r.push(uint8_t(text[i])));
  }
}

TEST(PatternTokens, PastTheCapTheStateIsWalkedAndDeadPatternsMakeRoom) {
  const auto vocab = vocabulary();
  TokenTrie trie(vocab);
  trie.use_pattern_sets(true, 1);  // no set fits: every patterned state falls back to the walk
  const auto schema = string_schema(kCases[0].schema);
  JsonSchemaRecognizer r(*schema);
  ASSERT_TRUE(r.push(std::string_view(R"({"s": "ab)")));
  std::vector<uint8_t> got;
  trie.allowed(r, got);
  EXPECT_EQ(got, pushed(r, vocab));
  EXPECT_EQ(trie.pattern_set_bytes(), 0u);

  // A cache with room for one set: a live pattern's set stays (built once); a second pattern's does not fit until
  // the first pattern is released.
  auto a = std::make_shared<const StringPattern>(compile_string_pattern("^[a-z]+$", "/a"));
  auto b = std::make_shared<const StringPattern>(compile_string_pattern("^[0-9]+$", "/b"));
  const auto set_of = [](int n) {
    PatternTokenSet s;
    s.ids.assign(size_t(n), 0);
    s.groups.push_back({0, 1, uint32_t(n)});
    return s;
  };
  PatternTokenCache cache(set_of(100).bytes() + 50);
  int builds = 0;
  const auto build = [&] { return ++builds, set_of(100); };
  ASSERT_NE(cache.get(a, a->start, build), nullptr);
  ASSERT_NE(cache.get(a, a->start, build), nullptr);
  EXPECT_EQ(builds, 1);
  EXPECT_EQ(cache.get(b, b->start, build), nullptr);
  a.reset();
  EXPECT_NE(cache.get(b, b->start, build), nullptr);
  EXPECT_EQ(cache.bytes(), set_of(100).bytes());
}

TEST(PatternTokens, ABuildDoesNotHoldTheCacheFromOtherPatterns) {
  // One request's slow build (a broad pattern's first step) must not stall another's lookup: the build below waits
  // until the other thread's get() of another pattern has returned, which under the cache's lock would never come.
  auto slow = std::make_shared<const StringPattern>(compile_string_pattern("^[a-z]+$", "/slow"));
  auto quick = std::make_shared<const StringPattern>(compile_string_pattern("^[0-9]+$", "/quick"));
  PatternTokenCache cache;
  std::atomic<bool> building = false, other_done = false;
  bool waited = false;
  std::thread builder([&] {
    cache.get(slow, slow->start, [&] {
      building = true;
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!other_done && std::chrono::steady_clock::now() < until) std::this_thread::yield();
      waited = other_done;
      return PatternTokenSet{};
    });
  });
  while (!building) std::this_thread::yield();
  cache.get(quick, quick->start, [] { return PatternTokenSet{}; });
  other_done = true;
  builder.join();
  EXPECT_TRUE(waited);
  // Two builds of one state: the first kept is what both later lookups see.
  auto first = cache.get(quick, quick->start, [] { return PatternTokenSet{{1}, {{0, 1, 1}}}; });
  EXPECT_TRUE(first->ids.empty());
}

TEST(PatternTokens, GroupsHoldEachTokenOnceByEndStateAndCharacters) {
  std::vector<PatternTokenHit> hits = {{3, 2, 7}, {1, 1, 9}, {3, 2, 4}, {1, 2, 5}, {1, 1, 2}};
  const PatternTokenSet set = group_pattern_tokens(hits);
  EXPECT_EQ(set.ids, (std::vector<int32_t>{2, 9, 5, 4, 7}));
  ASSERT_EQ(set.groups.size(), 3u);
  EXPECT_EQ(set.groups[0].end, 1);
  EXPECT_EQ(set.groups[0].chars, 1u);
  EXPECT_EQ(set.groups[0].stop, 2u);
  EXPECT_EQ(set.groups[1].stop, 3u);
  EXPECT_EQ(set.groups[2].end, 3);
  EXPECT_EQ(set.groups[2].stop, 5u);
}

}  // namespace
}  // namespace attnzoo
