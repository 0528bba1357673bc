#pragma once
// Exact speculative decoding: a cheap proposer guesses the next k tokens, the target model scores all of them in
// one forward pass (k + 1 rows of logits), and a prefix of the guesses is kept plus one token of the target's own,
// so the output has exactly the distribution of sampling the target token by token after the sampler's processing
// (penalties, temperature, top-k / top-p / min-p applied to the target's and the draft's logits alike).
//
// Deterministic guesses (n-gram lookup) are checked against the token the position's own keyed draw picks
// (engine/sampler.h): a guess is kept when it is that token, and where it is not that token is the output. The
// output is then token for token what sampling without speculation gives for the same seed, however many guesses
// a step carried (so a seeded request's text does not depend on the server's load); a guess is kept with
// probability p(guess), as under the rejection rule. A draft model's guesses come with their distribution q and
// go through the standard rejection rule (Leviathan et al. 2023; Chen et al. 2023), which keeps more of them than
// a coupled draw could but makes the text depend on which guesses were made. Greedy output is the target's argmax
// chain either way.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/sampler.h"

namespace attnzoo {

enum class SpeculativeMethod { none, ngram, draft };

// vLLM's speculative_config names: method, num_speculative_tokens, prompt_lookup_min / max, model (the draft).
struct SpeculativeOptions {
  SpeculativeMethod method = SpeculativeMethod::none;
  int64_t num_speculative_tokens = 0;  // k: tokens proposed per step
  int64_t prompt_lookup_min = 1, prompt_lookup_max = 3;  // ngram: the n-gram lengths tried, longest first
  std::string draft_model;  // draft: a model directory (or GGUF) sharing the target's tokenizer (front ends load it)

  bool enabled() const { return method != SpeculativeMethod::none; }
  void validate() const;  // ArgumentError naming the field
};

// "ngram" / "draft" / "none" (vLLM's method names); ArgumentError naming `what` otherwise.
SpeculativeMethod parse_speculative_method(const std::string& name, const std::string& what);

// Up to k guesses. `q` holds, per guess, the proposer's sampling distribution it was drawn from (vocab entries,
// after the same sampler processing as the target's); empty when the guesses are deterministic (a point mass on
// each token, as n-gram lookup's).
struct Proposal {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> q;
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  // Guesses up to k tokens to follow `context` (the prompt and every token generated so far). `target` is the
  // target's sampler, positioned at the first guess's token: a draft model processes its logits with the same
  // parameters and draws guess i from the keyed uniform at position() + i.
  virtual void propose(std::span<const int32_t> context, int64_t k, const Sampler& target, Proposal& out) = 0;
};

// Acceptance counters with vLLM's meanings (spec_decode num_drafts / num_draft_tokens / num_accepted_tokens).
struct SpeculativeStats {
  int64_t drafts = 0;           // verification passes that carried at least one guess
  int64_t draft_tokens = 0;     // guesses verified
  int64_t accepted_tokens = 0;  // guesses kept
  std::vector<int64_t> accepted_per_position;  // [k]: how often the guess at each position was kept

  double acceptance_rate() const { return draft_tokens ? double(accepted_tokens) / double(draft_tokens) : 0.0; }
  // Tokens each verification pass yields: the kept guesses plus the target's own token.
  double mean_acceptance_length() const { return drafts ? 1.0 + double(accepted_tokens) / double(drafts) : 0.0; }
  void add(int64_t proposed, int64_t accepted);
};

// Verification over one sequence's rows. `logits` holds proposal.tokens.size() + 1 rows of `vocab` target
// logits: row i follows context + the first i guesses. Without q, guess i is kept when Sampler::sample on row i
// returns it, and that sample is the output where it does not. With q, guess i is kept with probability
// min(1, p_i(d) / q_i(d)) and the first one rejected is replaced by a draw from norm(max(0, p_i - q_i)). If every
// guess is kept a bonus token is sampled from the last row. Returns the kept guesses followed by that one token
// (so at least one token). `sampler` supplies p (Sampler::probabilities) and the keyed draws, starting at its
// position; it is left after the last token returned.
std::vector<int32_t> verify_proposal(std::span<const float> logits, int64_t vocab, std::span<const int32_t> context,
                                     const Proposal& proposal, Sampler& sampler);

// The token a uniform `u` in [0, 1) picks from a probability row, walking it in id order (the mass is
// renormalised; a zero row is an error).
int32_t draw_from_probabilities(std::span<const float> probs, double u);

}  // namespace attnzoo
