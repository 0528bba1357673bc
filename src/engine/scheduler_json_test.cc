// JSON mode in the scheduler, on the tiny Llama with one printable character per id (JSON's punctuation, digits
// and letters among them): at temperature 1 every sample that ends "stop" streamed one JSON object (read back by
// the loader's own JSON parser) and ended at its closing brace; the same requests without JSON mode do not give
// objects; n = 2 forks and a pool small enough to preempt and recompute give the same tokens as an ample pool; a
// vocabulary with no token to continue the object fails that request alone, saying so. Structured outputs
// (json_schema) the same way: every sample that ends "stop" is a document the schema validates (checked here on
// the loader's parse, independently of the recognizer), none does without the mask.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "engine/json_schema.h"
#include "engine/json_schema_recognizer.h"
#include "engine/scheduler.h"
#include "engine/scheduler_test_fixture.h"
#include "loader/json.h"
#include "loader/json_try_parse.h"
#include "tokenizer/tokenizer.h"

namespace attnzoo {
namespace {

using scheduler_testing::SchedulerTest;

// `fuse` false: no decoder, so ids decode space-separated and every token's bytes begin with a space.
std::shared_ptr<const tok::Tokenizer> char_tokenizer(bool fuse = true) {
  std::string vocab;
  for (int id = 0; id < testing::kTinyLlamaVocab; ++id) {
    char piece[8];
    std::snprintf(piece, sizeof piece, "\\u%04x", 0x21 + id);  // '!' onwards: '"', '{', ':', digits, letters...
    vocab += (id ? ", \"" : "\"") + std::string(piece) + "\": " + std::to_string(id);
  }
  return tok::Tokenizer::from_json(R"({"model": {"type": "BPE", "vocab": {)" + vocab + R"(}, "merges": []})" +
                                       (fuse ? R"(, "decoder": {"type": "Fuse"}})" : "}"),
                                   "chars.json");
}

struct Texts {
  std::string error;
  std::map<int64_t, std::string> text;
  std::map<int64_t, std::vector<int32_t>> tokens;
  std::map<int64_t, FinishReason> reasons;
};

OutputCallback into(Texts& t) {
  return [&t](RequestOutput&& out) {
    for (auto& d : out.samples) {
      t.text[d.index] += d.text;
      auto& ids = t.tokens[d.index];
      ids.insert(ids.end(), d.token_ids.begin(), d.token_ids.end());
      if (d.finish_reason) t.reasons[d.index] = *d.finish_reason;
    }
    if (!out.error.empty()) t.error = out.error;
  };
}

bool is_object(const std::string& text) {
  const std::optional<json::Value> v = json::try_parse(text);
  return v && v->is_object();
}

class SchedulerJsonTest : public SchedulerTest {
 protected:
  void SetUp() override {
    SchedulerTest::SetUp();
    eos_.clear();
  }
  std::shared_ptr<const JsonSchema> schema_;

  std::vector<Texts> run(int64_t blocks, ResponseFormat format, int requests, bool fuse = true) {
    auto model = load(blocks);
    Scheduler s(*model, char_tokenizer(fuse), defaults());
    std::vector<Texts> got(static_cast<size_t>(requests));
    for (int i = 0; i < requests; ++i) {
      Request r;
      r.prompt = prompt_of(5 + i % 4, i);
      r.params.sampling.temperature = 1.f;
      r.params.sampling.seed = uint64_t(100 + i);
      r.params.max_tokens = 40;
      r.params.n = 2;
      r.params.response_format = format;
      if (format == ResponseFormat::json_schema) r.params.json_schema = schema_;
      s.add(uint64_t(i + 1), r, into(got[size_t(i)]), EngineClock::now());
    }
    drain(s);
    if (!fuse) return got;
    for (const auto& t : got)
      for (const auto& [k, reason] : t.reasons)
        EXPECT_TRUE(reason == FinishReason::stop || reason == FinishReason::length) << finish_reason_name(reason);
    if (blocks > 0) EXPECT_GT(s.stats().preemptions, 0) << "the small pool was meant to preempt";
    return got;
  }

  // At temperature 1 with n = 2: every sample that ends "stop" is a document `valid` accepts (checked on the
  // loader's parse), ending at its closing brace; every other ends "length" on a prefix that `fresh` (a new
  // recognizer) accepts and finds incomplete; at least half stop. A pool small enough to preempt and recompute
  // gives the same tokens as an ample one.
  template <class Recognizer>
  void expect_documents_that_survive_preemption(ResponseFormat format, bool (*valid)(const std::string&),
                                                const Recognizer& fresh) {
    const int N = 12;
    const auto ample = run(0, format, N);
    int stops = 0;
    for (const auto& t : ample)
      for (int64_t k = 0; k < 2; ++k) {
        const std::string& text = t.text.at(k);
        if (t.reasons.at(k) == FinishReason::stop) {
          ++stops;
          EXPECT_TRUE(valid(text)) << text;
          EXPECT_EQ(text.back(), '}') << "the sample ends at the object's closing brace";
        } else {
          ASSERT_EQ(t.reasons.at(k), FinishReason::length) << text;
          Recognizer r = fresh;
          EXPECT_TRUE(r.push(text) && !r.complete()) << text;
        }
      }
    EXPECT_GE(stops, N / 2) << "too few samples closed their object for the test to say much";

    const auto preempted = run(28, format, N);
    for (int i = 0; i < N; ++i) EXPECT_EQ(preempted[size_t(i)].tokens, ample[size_t(i)].tokens) << "request " << i;
  }
};

TEST_F(SchedulerJsonTest, SamplesAreJsonObjectsOrPrefixesAndSurvivePreemption) {
  expect_documents_that_survive_preemption(ResponseFormat::json_object, is_object, JsonRecognizer());

  const int N = 12;
  const auto free = run(0, ResponseFormat::text, N);
  for (const auto& t : free)
    for (const auto& [k, text] : t.text) EXPECT_FALSE(is_object(text)) << text;
}

// A vocabulary that cannot spell what the object needs next (here every token begins with a space, so no token
// continues "t" into "true") fails that request alone, with the reason; the others finish.
TEST_F(SchedulerJsonTest, AVocabularyThatCannotContinueFailsTheRequestByName) {
  const auto got = run(0, ResponseFormat::json_object, 12, /*fuse=*/false);
  int failed = 0, finished = 0;
  for (const auto& t : got) {
    if (!t.error.empty()) {
      ++failed;
      EXPECT_NE(t.error.find("response_format json_object: no token of the vocabulary continues"), std::string::npos)
          << t.error;
    } else {
      ++finished;
      for (const auto& [k, reason] : t.reasons) EXPECT_NE(reason, FinishReason::error);
    }
  }
  EXPECT_GT(failed, 0);
  EXPECT_GT(finished, 0);
}

// The schema below, checked on the parsed value: "id" an integer written without fraction, "tags" at most two of
// "a" / "b", "name" a string of at most 3 characters; "id" and "name" present; no other key; the schema's order.
constexpr const char* kSchema = R"({"type": "object", "properties": {"id": {"type": "integer"},
    "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2},
    "name": {"type": "string", "maxLength": 3}}, "required": ["id", "name"]})";

bool follows_schema(const std::string& text) {
  const std::optional<json::Value> v = json::try_parse(text);
  if (!v || !v->is_object()) return false;
  const auto members = v->members_in_source_order();
  const std::vector<std::string> order = {"id", "tags", "name"};
  size_t at = 0;
  for (const json::Member* m : members) {
    while (at < order.size() && order[at] != m->first) ++at;
    if (at++ == order.size()) return false;  // not a property, or out of order
  }
  const json::Value *id = v->find("id"), *tags = v->find("tags"), *name = v->find("name");
  if (!id || !id->is_integer() || id->is_float_literal() || !name || !name->is_string()) return false;
  int64_t chars = 0;
  for (unsigned char c : name->as_string()) chars += (c & 0xC0) != 0x80;
  if (chars > 3) return false;
  if (tags) {
    if (!tags->is_array() || tags->as_array().size() > 2) return false;
    for (const auto& t : tags->as_array())
      if (!t.is_string() || (t.as_string() != "a" && t.as_string() != "b")) return false;
  }
  return true;
}

TEST_F(SchedulerJsonTest, JsonSchemaSamplesValidateAndSurvivePreemption) {
  schema_ = compile_json_schema(json::parse(kSchema));
  expect_documents_that_survive_preemption(ResponseFormat::json_schema, follows_schema,
                                           JsonSchemaRecognizer(*schema_));

  const int N = 12;
  for (const auto& t : run(0, ResponseFormat::json_object, N))
    for (const auto& [k, text] : t.text) EXPECT_FALSE(follows_schema(text)) << text;
  for (const auto& t : run(0, ResponseFormat::text, N))
    for (const auto& [k, text] : t.text) EXPECT_FALSE(follows_schema(text)) << text;
}

// Every token begins with a space: a key can open (whitespace may precede it) but not go on, so every request
// fails, saying so, rather than writing a document the schema does not allow.
TEST_F(SchedulerJsonTest, JsonSchemaWithAVocabularyThatCannotContinueFailsByName) {
  schema_ = compile_json_schema(json::parse(kSchema));
  const auto got = run(0, ResponseFormat::json_schema, 4, /*fuse=*/false);
  for (const auto& t : got)
    EXPECT_NE(t.error.find("response_format json_schema: no token of the vocabulary continues"), std::string::npos)
        << t.error;
}

}  // namespace
}  // namespace attnzoo
