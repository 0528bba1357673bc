// The generation loop against test doubles: a model whose next-token logits are a fixed function of the last
// token (so every expected sequence is known), and a text stream that spells token i as a fixed piece.
#include "engine/generate.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace attnzoo {
namespace {

// Greedy continuation of token t is (t + 1) % vocab; records every append so the test can check the schedule.
class CountingModel : public LogitsSource {
 public:
  explicit CountingModel(int64_t vocab) : vocab_(vocab) {}
  int64_t vocab_size() const override { return vocab_; }
  int64_t max_positions() const override { return max_positions_; }
  void append(std::span<const int32_t> tokens, std::span<float> logits) override {
    calls.emplace_back(tokens.begin(), tokens.end());
    const int32_t next = int32_t((tokens.back() + 1) % vocab_);
    for (int64_t i = 0; i < vocab_; ++i) logits[size_t(i)] = i == next ? 10.f : 0.f;
  }
  std::vector<std::vector<int32_t>> calls;
  int64_t max_positions_ = 0;

 private:
  int64_t vocab_;
};

// Token i spells "<i>"; token 9 is the first byte of a two-byte UTF-8 character that token 10 completes.
class PieceStream : public TextStream {
 public:
  std::string push(int32_t t) override {
    if (t == 9) {
      held_ = "\xC3";
      return "";
    }
    if (t == 10) {
      std::string s = held_ + "\xA9";
      held_.clear();
      return s;
    }
    return "<" + std::to_string(t) + ">";
  }
  std::string flush() override { return std::exchange(held_, ""); }

 private:
  std::string held_;
};

GenerationOptions greedy(int64_t n) {
  GenerationOptions o;
  o.sampling.temperature = 0;
  o.max_new_tokens = n;
  return o;
}

TEST(Generate, PrefillOnceThenOneTokenPerStep) {
  CountingModel model(50);
  const std::vector<int32_t> prompt = {3, 4, 5};
  PieceStream text;
  std::string streamed;
  const auto r = generate(model, prompt, greedy(4), &text, [&](std::string_view s) { streamed += s; });
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{6, 7, 8, 9}));
  EXPECT_EQ(r.reason, StopReason::max_new_tokens);
  ASSERT_EQ(model.calls.size(), 4u);  // the prompt, then 7, 8, 9 (no forward pass after the last token)
  EXPECT_EQ(model.calls[0], prompt);
  EXPECT_EQ(model.calls[1], std::vector<int32_t>{6});
  EXPECT_EQ(model.calls[3], std::vector<int32_t>{8});
  EXPECT_EQ(r.text, "<6><7><8>\xC3");  // the held half character is flushed at the end
  EXPECT_EQ(streamed, r.text);
  EXPECT_EQ(r.prompt_tokens, 3);
  EXPECT_EQ(r.decode_steps, 3);
}

TEST(Generate, EosEndsGenerationAndIsKeptButNotSpelled) {
  CountingModel model(50);
  PieceStream text;
  auto o = greedy(10);
  o.eos_token_ids = {99, 7};
  const std::vector<int32_t> prompt = {4};
  const auto r = generate(model, prompt, o, &text);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(r.reason, StopReason::eos);
  EXPECT_EQ(r.text, "<5><6>");
}

TEST(Generate, StopStringTrimsTextAndEndsEarly) {
  CountingModel model(50);
  PieceStream text;
  auto o = greedy(20);
  o.stop = {"<14"};
  std::string streamed;
  const std::vector<int32_t> prompt = {10};
  const auto r = generate(model, prompt, o, &text, [&](std::string_view s) { streamed += s; });
  EXPECT_EQ(r.reason, StopReason::stop_string);
  EXPECT_EQ(r.tokens.back(), 14);
  EXPECT_EQ(r.text, "<11><12><13>");
  EXPECT_EQ(streamed, r.text);  // nothing of the stop string was ever streamed
}

TEST(Generate, CancelEndsBeforeTheNextForwardPass) {
  CountingModel model(50);
  PieceStream text;
  auto o = greedy(20);
  int polls = 0;
  o.cancel = [&] { return ++polls == 3; };  // an interrupt arriving while the third token streams
  const std::vector<int32_t> prompt = {1};
  const auto r = generate(model, prompt, o, &text);
  EXPECT_EQ(r.reason, StopReason::cancelled);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{2, 3, 4}));
  EXPECT_EQ(r.text, "<2><3><4>");
  EXPECT_EQ(model.calls.size(), 3u);  // the prompt, 2 and 3: no pass for 4
}

TEST(Generate, UnicodeIsNeverSplit) {
  CountingModel model(50);
  PieceStream text;
  std::vector<std::string> pieces;
  const std::vector<int32_t> prompt = {7};
  generate(model, prompt, greedy(3), &text, [&](std::string_view s) { pieces.emplace_back(s); });
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0], "<8>");
  EXPECT_EQ(pieces[1], "\xC3\xA9");
}

TEST(Generate, SampledRunsAreReproducible) {
  GenerationOptions o;
  o.max_new_tokens = 12;
  o.sampling.temperature = 5.f;  // flat enough that the draws matter
  o.sampling.seed = 7;
  const std::vector<int32_t> prompt = {1, 2};
  CountingModel a(30), b(30);
  const auto ra = generate(a, prompt, o), rb = generate(b, prompt, o);
  EXPECT_EQ(ra.tokens, rb.tokens);
  o.sampling.seed = 8;
  CountingModel c(30);
  EXPECT_NE(generate(c, prompt, o).tokens, ra.tokens);
}

TEST(Generate, BadArgumentsAreNamed) {
  CountingModel model(10);
  const std::vector<int32_t> empty, prompt = {1}, outside = {10};
  EXPECT_THROW(generate(model, empty, greedy(3)), ArgumentError);
  EXPECT_THROW(generate(model, outside, greedy(3)), ArgumentError);
  EXPECT_THROW(generate(model, prompt, greedy(-1)), ArgumentError);
  auto o = greedy(3);
  o.stop = {"x"};
  EXPECT_THROW(generate(model, prompt, o), ArgumentError);  // stop strings without a text stream
  EXPECT_TRUE(generate(model, prompt, greedy(0)).tokens.empty());
}

// transformers' min_new_tokens: the EOS id the model prefers third is banned, so greedy takes the best other token
// (id 0: every other logit ties at 0) until five new tokens exist; EOS then ends generation as usual.
TEST(Generate, MinNewTokensBansEosUntilThatManyTokensExist) {
  CountingModel model(50);
  auto o = greedy(20);
  o.eos_token_ids = {99, 7};
  const std::vector<int32_t> prompt = {4};
  EXPECT_EQ(generate(model, prompt, o).tokens, (std::vector<int32_t>{5, 6, 7}));
  o.min_new_tokens = 5;
  const auto r = generate(model, prompt, o);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{5, 6, 0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(r.reason, StopReason::eos);
  o.min_new_tokens = 3;  // the third token is the last one banned
  EXPECT_EQ(generate(model, prompt, o).tokens, (std::vector<int32_t>{5, 6, 0, 1, 2, 3, 4, 5, 6, 7}));
  o.min_new_tokens = 2;
  EXPECT_EQ(generate(model, prompt, o).tokens, (std::vector<int32_t>{5, 6, 7}));
  // max_new_tokens still wins, as transformers lets it.
  o.max_new_tokens = 4;
  o.min_new_tokens = 10;
  const auto capped = generate(model, prompt, o);
  EXPECT_EQ(capped.tokens, (std::vector<int32_t>{5, 6, 0, 1}));
  EXPECT_EQ(capped.reason, StopReason::max_new_tokens);
  o.min_new_tokens = -1;
  try {
    generate(model, prompt, o);
    FAIL() << "a negative min_new_tokens was accepted";
  } catch (const ArgumentError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("min_new_tokens: must be >= 0", 0), 0u) << e.what();
  }
}

// No stop string ends in the text of the first min_new_tokens tokens ("<6>" goes by); one that begins there and
// ends after them stops generation ("7><8": token 8 is the fourth).
TEST(Generate, StopStringsEndOnlyPastMinNewTokens) {
  auto o = greedy(20);
  o.stop = {"<6>", "7><8"};
  const std::vector<int32_t> prompt = {4};
  CountingModel plain_model(50);
  PieceStream plain_text;
  const auto plain = generate(plain_model, prompt, o, &plain_text);
  EXPECT_EQ(plain.tokens, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(plain.text, "<5>");
  o.min_new_tokens = 3;
  CountingModel model(50);
  PieceStream text;
  std::string streamed;
  const auto r = generate(model, prompt, o, &text, [&](std::string_view s) { streamed += s; });
  EXPECT_EQ(r.reason, StopReason::stop_string);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{5, 6, 7, 8}));
  EXPECT_EQ(r.text, "<5><6><");
  EXPECT_EQ(streamed, r.text);
}

// The context window bounds every run: a huge max_new_tokens stops when prompt + new tokens fill the model's
// positions (never feeding a position past the last), and a longer prompt is refused by name.
TEST(Generate, StopsAtMaxPositionsAndRefusesLongerPrompts) {
  CountingModel model(10);
  model.max_positions_ = 6;
  const std::vector<int32_t> prompt = {1, 2};
  const GenerationResult r = generate(model, prompt, greedy(int64_t(1) << 40));
  EXPECT_EQ(r.reason, StopReason::max_positions);
  EXPECT_EQ(r.tokens.size(), 4u);  // 2 + 4 = 6 positions
  int64_t fed = 0;
  for (const auto& c : model.calls) fed += int64_t(c.size());
  EXPECT_LE(fed, 6);
  const std::vector<int32_t> full(6, 1), longer(7, 1);
  EXPECT_TRUE(generate(model, full, greedy(5)).tokens.empty());
  try {
    generate(model, longer, greedy(5));
    FAIL() << "a prompt past max_positions was accepted";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("prompt"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("max_position_embeddings"), std::string::npos);
  }
}

}  // namespace
}  // namespace attnzoo
