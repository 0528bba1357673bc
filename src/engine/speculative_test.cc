// Speculative decoding against exact answers. A tiny model (vocabulary 6, logits a fixed random function of the
// last two tokens) makes the distribution of every short continuation computable by enumeration with the plain
// sampler reference; generating it many times with speculation (n-gram lookup, a good draft, a deliberately bad
// draft) must reproduce that joint distribution by Pearson's chi-square, and greedy output must equal plain
// greedy decoding token for token.
#include "engine/speculative.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <random>

#include "core/error.h"
#include "engine/chi_square.h"
#include "engine/draft_proposer.h"
#include "engine/generate.h"
#include "engine/ngram_proposer.h"
#include "engine/sampler_reference.h"

namespace attnzoo {
namespace {

constexpr int64_t kVocab = 6;

#define EXPECT_THROW_NAMING(statement, name)                                                     \
  do {                                                                                           \
    try {                                                                                        \
      statement;                                                                                 \
      ADD_FAILURE() << "no ArgumentError";                                                       \
    } catch (const ArgumentError& e) {                                                           \
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();                \
    }                                                                                            \
  } while (0)

// Logits of token t after (a, b) come from a table filled by `seed`; `sharpness` scales them.
class TinyModel : public LogitsSource {
 public:
  TinyModel(uint64_t seed, float sharpness) : table_(size_t(kVocab * kVocab * kVocab)) {
    std::mt19937_64 gen(seed);
    std::normal_distribution<float> dist(0.f, sharpness);
    for (float& v : table_) v = dist(gen);
  }
  int64_t vocab_size() const override { return kVocab; }
  void append(std::span<const int32_t> tokens, std::span<float> logits) override {
    for (int32_t t : tokens) seen_.push_back(t);
    row(seen_.size(), logits.data());
    ++forward_calls;
  }
  bool can_speculate() const override { return true; }
  void append_all(std::span<const int32_t> tokens, std::span<float> logits) override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      seen_.push_back(tokens[i]);
      row(seen_.size(), logits.data() + i * size_t(kVocab));
    }
    ++forward_calls;
  }
  void checkpoint() override { checkpoint_ = int64_t(seen_.size()); }
  void rollback(int64_t length) override {
    // As the real pool: only back to the checkpoint or later (or to an empty sequence).
    if (length != 0 && length < checkpoint_) throw ArgumentError("length: before the checkpoint");
    ASSERT_LE(length, int64_t(seen_.size()));
    seen_.resize(size_t(length));
  }
  // The logits after the first `n` tokens of `ids`.
  void row_for(std::span<const int32_t> ids, float* out) const {
    const int32_t a = ids.size() >= 2 ? ids[ids.size() - 2] : 0, b = ids.empty() ? 0 : ids.back();
    std::copy_n(table_.begin() + (a * kVocab + b) * kVocab, kVocab, out);
  }
  const std::vector<int32_t>& seen() const { return seen_; }
  int64_t forward_calls = 0;

 private:
  void row(size_t n, float* out) const { row_for(std::span(seen_).first(n), out); }
  std::vector<float> table_;
  std::vector<int32_t> seen_;
  int64_t checkpoint_ = 0;
};

// Every continuation of `new_tokens` tokens and its exact probability, token by token through the reference;
// `banned` ids get -inf logits while fewer than `min_new_tokens` new tokens exist.
std::map<std::vector<int32_t>, double> exact_joint(const TinyModel& m, const std::vector<int32_t>& prompt,
                                                   int new_tokens, const SamplingParams& p,
                                                   const std::vector<int32_t>& banned = {}, int min_new_tokens = 0) {
  std::map<std::vector<int32_t>, double> out;
  std::vector<float> logits(kVocab);
  std::function<void(std::vector<int32_t>&, std::vector<int32_t>&, double)> walk =
      [&](std::vector<int32_t>& ctx, std::vector<int32_t>& gen, double prob) {
        if (int(gen.size()) == new_tokens) {
          out[gen] = prob;
          return;
        }
        m.row_for(ctx, logits.data());
        if (int(gen.size()) < min_new_tokens)
          for (int32_t id : banned) logits[size_t(id)] = -std::numeric_limits<float>::infinity();
        const auto probs = sampling_distribution_reference(logits, ctx, p);
        for (int32_t t = 0; t < kVocab; ++t) {
          if (probs[size_t(t)] == 0) continue;
          ctx.push_back(t);
          gen.push_back(t);
          walk(ctx, gen, prob * probs[size_t(t)]);
          ctx.pop_back();
          gen.pop_back();
        }
      };
  std::vector<int32_t> ctx = prompt, gen;
  walk(ctx, gen, 1.0);
  return out;
}

enum class Kind { ngram, good_draft, bad_draft };

GenerationResult run(TinyModel& target, Kind kind, const std::vector<int32_t>& prompt, const SamplingParams& p,
                     int64_t n, int64_t k, const std::vector<int32_t>& eos = {}, int64_t min_new_tokens = 0) {
  GenerationOptions o;
  o.sampling = p;
  o.max_new_tokens = n;
  o.eos_token_ids = eos;
  o.min_new_tokens = min_new_tokens;
  o.num_speculative_tokens = k;
  NgramProposer ngram(1, 3);
  // A good draft is the target with a little noise; a bad one is an unrelated, sharply peaked model.
  TinyModel draft(kind == Kind::bad_draft ? 999 : 7, kind == Kind::bad_draft ? 4.f : 1.5f);
  DraftProposer drafter(draft, kVocab);
  o.proposer = kind == Kind::ngram ? static_cast<Proposer*>(&ngram) : &drafter;
  return generate(target, prompt, o);
}

SamplingParams params(float t, int64_t top_k, float top_p, float min_p, float rep, uint64_t seed) {
  return {.temperature = t, .top_k = top_k, .top_p = top_p, .min_p = min_p, .repetition_penalty = rep, .seed = seed};
}

// Plain greedy decoding of the target (seed 42): what speculation must reproduce.
GenerationOptions greedy(int64_t n) {
  GenerationOptions o;
  o.sampling.temperature = 0;
  o.max_new_tokens = n;
  return o;
}

std::vector<int32_t> plain_greedy(const std::vector<int32_t>& prompt, const GenerationOptions& o) {
  TinyModel m(42, 1.5f);
  return generate(m, prompt, o).tokens;
}

TEST(NgramLookup, LongestEarliestMatchProposesWhatFollowed) {
  const std::vector<int32_t> ctx = {1, 2, 3, 9, 1, 2, 3, 4, 5, 7, 2, 3};
  // "2 3" first occurs at index 1 (followed by 9 1 2); "7 2 3" (n = 3) never recurs.
  EXPECT_EQ(ngram_lookup(ctx, 3, 1, 3), (std::vector<int32_t>{9, 1, 2}));
  EXPECT_EQ(ngram_lookup(ctx, 1, 1, 3), (std::vector<int32_t>{9}));
  const std::vector<int32_t> ctx2 = {5, 1, 2, 6, 8, 1, 2};
  EXPECT_EQ(ngram_lookup(ctx2, 4, 2, 2), (std::vector<int32_t>{6, 8, 1, 2}));
  EXPECT_TRUE(ngram_lookup(ctx2, 4, 3, 4).empty());          // no 3-gram recurs
  EXPECT_EQ(ngram_lookup({{4, 4, 4}}, 5, 1, 2), (std::vector<int32_t>{4}));  // overlapping match, to the end
  EXPECT_TRUE(ngram_lookup({{4}}, 5, 1, 2).empty());
  EXPECT_TRUE(ngram_lookup(ctx, 0, 1, 3).empty());
}

TEST(Speculative, OptionsAreValidatedByName) {
  SpeculativeOptions o;
  o.method = SpeculativeMethod::ngram;
  EXPECT_THROW_NAMING(o.validate(), "num_speculative_tokens");
  o.num_speculative_tokens = 3;
  o.prompt_lookup_min = 4;
  EXPECT_THROW_NAMING(o.validate(), "prompt_lookup_max");
  o.method = SpeculativeMethod::draft;
  o.prompt_lookup_min = 1;
  EXPECT_THROW_NAMING(make_proposer(o, nullptr, kVocab), "draft_model");
  EXPECT_THROW_NAMING(parse_speculative_method("eagle", "--speculative"), "--speculative");
  TinyModel m(1, 1.f);
  EXPECT_THROW_NAMING(DraftProposer(m, 5000), "draft_model");
}

TEST(Speculative, VerifyRejectsMalformedProposals) {
  Sampler s(params(1.f, 0, 1.f, 0.f, 1.f, 1));
  Proposal p;
  p.tokens = {1, 2};
  std::vector<float> logits(size_t(2 * kVocab));  // one row short
  EXPECT_THROW_NAMING(verify_proposal(logits, kVocab, {}, p, s), "logits");
  p.q.resize(1);
  logits.resize(size_t(3 * kVocab));
  EXPECT_THROW_NAMING(verify_proposal(logits, kVocab, {}, p, s), "proposal");
}

// The heart of it: the joint distribution of 3 new tokens, sampled with speculation, is the target's.
TEST(SpeculativeStatistics, SampledContinuationsFollowTheTargetDistribution) {
  TinyModel target(42, 1.5f);
  const std::vector<int32_t> prompt = {1, 2, 3, 1, 2, 4, 1, 2};
  const int new_tokens = 3, draws = 12000;
  const std::vector<std::pair<const char*, SamplingParams>> cases = {
      {"plain", params(1.f, 0, 1.f, 0.f, 1.f, 0)},
      {"hot+top_k", params(1.4f, 4, 1.f, 0.f, 1.f, 0)},
      {"top_p+min_p+penalty", params(0.8f, 0, 0.8f, 0.05f, 1.3f, 0)},
  };
  for (Kind kind : {Kind::ngram, Kind::good_draft, Kind::bad_draft}) {
    for (const auto& [name, p0] : cases) {
      SCOPED_TRACE(std::string(name) + (kind == Kind::ngram ? " ngram" : kind == Kind::good_draft ? " good draft" : " bad draft"));
      const auto joint = exact_joint(target, prompt, new_tokens, p0);
      std::map<std::vector<int32_t>, size_t> cell;
      std::vector<double> probs;
      for (const auto& [seq, prob] : joint) {
        cell[seq] = probs.size();
        probs.push_back(prob);
      }
      std::vector<int64_t> counts(probs.size(), 0);
      int64_t outside = 0, proposed = 0, accepted = 0, rejected_steps = 0;
      for (int i = 0; i < draws; ++i) {
        SamplingParams p = p0;
        p.seed = uint64_t(i) * 7919 + 3;
        TinyModel fresh = target;
        const GenerationResult r = run(fresh, kind, prompt, p, new_tokens, 2);
        ASSERT_EQ(int(r.tokens.size()), new_tokens);
        proposed += r.speculative.draft_tokens;
        accepted += r.speculative.accepted_tokens;
        rejected_steps += r.speculative.draft_tokens - r.speculative.accepted_tokens > 0;
        const auto it = cell.find(r.tokens);
        if (it == cell.end()) ++outside; else ++counts[it->second];
      }
      EXPECT_EQ(outside, 0) << "continuations the target can never produce";
      // The test only means something if guesses were made, kept and refused.
      EXPECT_GT(proposed, draws / 2);
      EXPECT_GT(accepted, 0);
      EXPECT_GT(rejected_steps, 0);
      const ChiSquare fit = chi_square_fit(counts, probs);
      EXPECT_GT(fit.dof, 5);
      EXPECT_GT(fit.p_value, 1e-4) << "chi2 " << fit.statistic << " dof " << fit.dof;
    }
  }
}

// The fit above must be able to fail: a verifier that keeps every guess is caught.
TEST(SpeculativeStatistics, AcceptingEveryGuessIsCaught) {
  TinyModel target(42, 1.5f), bad(999, 4.f);
  const std::vector<int32_t> prompt = {1, 2, 3};
  const auto p0 = params(1.f, 0, 1.f, 0.f, 1.f, 0);
  const auto joint = exact_joint(target, prompt, 2, p0);
  std::map<std::vector<int32_t>, size_t> cell;
  std::vector<double> probs;
  for (const auto& [seq, prob] : joint) cell[seq] = probs.size(), probs.push_back(prob);
  std::vector<int64_t> counts(probs.size(), 0);
  for (int i = 0; i < 4000; ++i) {
    SamplingParams p = p0;
    p.seed = uint64_t(i) + 1;
    Sampler s(p);
    std::vector<int32_t> ctx = prompt;
    std::vector<float> logits(kVocab);
    bad.row_for(ctx, logits.data());
    const int32_t first = s.sample(logits, ctx);  // the draft's guesses, kept unchecked
    ctx.push_back(first);
    bad.row_for(ctx, logits.data());
    const int32_t second = s.sample(logits, ctx);
    ++counts[cell.at({first, second})];
  }
  EXPECT_LT(chi_square_fit(counts, probs).p_value, 1e-6);
}

TEST(Speculative, GreedyIsTokenForTokenPlainGreedy) {
  const std::vector<int32_t> prompt = {1, 2, 3, 1, 2, 4};
  const GenerationOptions plain = greedy(200);
  const auto want = plain_greedy(prompt, plain);
  ASSERT_EQ(want.size(), 200u);
  for (Kind kind : {Kind::ngram, Kind::good_draft, Kind::bad_draft})
    for (int64_t k : {1, 3, 5}) {
      TinyModel target(42, 1.5f);
      const GenerationResult r = run(target, kind, prompt, plain.sampling, 200, k);
      EXPECT_EQ(r.tokens, want) << "k " << k;
      EXPECT_GT(r.speculative.draft_tokens, 0);
      // The target's memory ends holding exactly the prompt and the output (its last token not yet fed).
      std::vector<int32_t> all = prompt;
      all.insert(all.end(), want.begin(), want.end() - 1);
      EXPECT_EQ(target.seen(), all);
      if (kind != Kind::bad_draft) EXPECT_LT(target.forward_calls, 200);  // fewer passes than tokens
    }
}

// With n-gram guesses a seeded sample is token for token the same with speculation as without, whatever k: the
// text of a seeded request cannot depend on how many guesses the server's load left room for.
TEST(Speculative, SeededNgramSpeculationIsTokenForTokenPlainSampling) {
  const std::vector<int32_t> prompt = {1, 2, 3, 1, 2, 4, 1, 2};
  int64_t accepted = 0, rejected = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    SamplingParams p = params(seed % 2 ? 1.3f : 0.8f, seed % 3 == 0 ? 4 : 0, seed % 5 == 0 ? 0.85f : 1.f, 0.f,
                              seed % 4 == 0 ? 1.2f : 1.f, seed);
    GenerationOptions o;
    o.sampling = p;
    o.max_new_tokens = 24;
    TinyModel plain(42, 1.5f);
    const auto want = generate(plain, prompt, o).tokens;
    for (int64_t k : {1, 2, 5}) {
      TinyModel target(42, 1.5f);
      const GenerationResult r = run(target, Kind::ngram, prompt, p, 24, k);
      ASSERT_EQ(r.tokens, want) << "seed " << seed << " k " << k;
      accepted += r.speculative.accepted_tokens;
      rejected += r.speculative.draft_tokens - r.speculative.accepted_tokens;
    }
  }
  EXPECT_GT(accepted, 500);  // the equality is only worth something where guesses were both kept and refused
  EXPECT_GT(rejected, 500);
}

TEST(Speculative, StopsExactlyAtEosAndMaxNewTokens) {
  const std::vector<int32_t> prompt = {1, 2, 3, 1, 2, 4};
  GenerationOptions o = greedy(50);
  const auto want = plain_greedy(prompt, o);
  o.eos_token_ids = {want[17]};
  const auto cut = plain_greedy(prompt, o);
  NgramProposer ngram(1, 3);
  o.proposer = &ngram;
  o.num_speculative_tokens = 4;
  TinyModel m2(42, 1.5f);
  const auto spec = generate(m2, prompt, o);
  EXPECT_EQ(spec.tokens, cut);
  EXPECT_EQ(spec.reason, StopReason::eos);
  o.eos_token_ids.clear();
  o.max_new_tokens = 23;
  TinyModel m3(42, 1.5f);
  EXPECT_EQ(generate(m3, prompt, o).tokens, std::vector<int32_t>(want.begin(), want.begin() + 23));
}

// min_new_tokens bans the EOS ids in every verified row that decides a token before the minimum, so speculation
// stays exact: greedy output is plain greedy's with the same minimum (the guesses, n-gram or draft, do not know
// it), and a seeded n-gram run is token for token plain sampling's.
TEST(Speculative, MinNewTokensIsExactUnderSpeculation) {
  const std::vector<int32_t> prompt = {1, 2, 3, 1, 2, 4};
  GenerationOptions plain = greedy(60);
  const auto free_run = plain_greedy(prompt, plain);
  plain.eos_token_ids = {free_run[2]};
  ASSERT_LE(plain_greedy(prompt, plain).size(), 3u);
  for (const int64_t min : {5, 17, 60}) {
    plain.min_new_tokens = min;
    const auto want = plain_greedy(prompt, plain);
    ASSERT_GE(int64_t(want.size()), min);  // the ban changed the output: EOS came at the third token before
    for (size_t i = 0; i < size_t(min) && i < want.size(); ++i) ASSERT_NE(want[i], plain.eos_token_ids[0]) << i;
    for (Kind kind : {Kind::ngram, Kind::good_draft, Kind::bad_draft})
      for (int64_t k : {1, 3, 5}) {
        TinyModel target(42, 1.5f);
        const GenerationResult r = run(target, kind, prompt, plain.sampling, 60, k, plain.eos_token_ids, min);
        EXPECT_EQ(r.tokens, want) << "min " << min << " k " << k;
        EXPECT_GT(r.speculative.draft_tokens, 0);
      }
  }
  for (uint64_t seed = 0; seed < 60; ++seed) {
    const SamplingParams p = params(seed % 2 ? 1.3f : 0.8f, seed % 3 == 0 ? 4 : 0, 1.f, 0.f, 1.f, seed);
    GenerationOptions o;
    o.sampling = p;
    o.max_new_tokens = 24;
    o.eos_token_ids = {1};
    o.min_new_tokens = 10;
    TinyModel m(42, 1.5f);
    const auto want = generate(m, prompt, o).tokens;
    for (int64_t k : {1, 4}) {
      TinyModel target(42, 1.5f);
      ASSERT_EQ(run(target, Kind::ngram, prompt, p, 24, k, o.eos_token_ids, 10).tokens, want) << "seed " << seed;
    }
  }
}

// Sampled with a draft's guesses, whose q never saw the ban, the joint distribution of 3 new tokens is the banned
// target's: the rejection rule runs against the banned rows.
TEST(SpeculativeStatistics, MinNewTokensSamplesTheBannedDistribution) {
  TinyModel target(42, 1.5f);
  const std::vector<int32_t> prompt = {1, 2, 3, 1, 2, 4, 1, 2};
  const std::vector<int32_t> eos = {3};
  const int new_tokens = 3, min_new_tokens = 2, draws = 12000;
  for (Kind kind : {Kind::ngram, Kind::good_draft, Kind::bad_draft}) {
    SCOPED_TRACE(kind == Kind::ngram ? "ngram" : kind == Kind::good_draft ? "good draft" : "bad draft");
    const SamplingParams p0 = params(1.2f, 0, 0.95f, 0.f, 1.2f, 0);
    const auto joint = exact_joint(target, prompt, new_tokens, p0, eos, min_new_tokens);
    std::map<std::vector<int32_t>, size_t> cell;
    std::vector<double> probs;
    for (const auto& [seq, prob] : joint) cell[seq] = probs.size(), probs.push_back(prob);
    std::vector<int64_t> counts(probs.size(), 0);
    int64_t outside = 0, proposed = 0;
    for (int i = 0; i < draws; ++i) {
      SamplingParams p = p0;
      p.seed = uint64_t(i) * 7919 + 5;
      TinyModel fresh = target;
      const GenerationResult r = run(fresh, kind, prompt, p, new_tokens, 2, eos, min_new_tokens);
      ASSERT_EQ(int(r.tokens.size()), new_tokens);  // EOS may only come third, the last token anyway
      proposed += r.speculative.draft_tokens;
      const auto it = cell.find(r.tokens);
      if (it == cell.end()) ++outside; else ++counts[it->second];
    }
    EXPECT_EQ(outside, 0) << "continuations the banned target can never produce";
    EXPECT_GT(proposed, draws / 2);
    const ChiSquare fit = chi_square_fit(counts, probs);
    EXPECT_GT(fit.p_value, 1e-4) << "chi2 " << fit.statistic << " dof " << fit.dof;
  }
}

}  // namespace
}  // namespace attnzoo
