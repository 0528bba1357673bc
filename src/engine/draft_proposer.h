#pragma once
// Speculation from a smaller draft model sharing the target's tokenizer (vLLM's "draft_model" method): the draft
// runs token by token on its own sequence, samples each guess from its logits processed exactly as the target's
// (Sampler::probabilities with the target's parameters), and hands those distributions over as q.
#include <vector>

#include <memory>

#include "engine/generate.h"
#include "engine/speculative.h"
#include "models/model.h"

namespace attnzoo {

class DraftProposer : public Proposer {
 public:
  // `draft`: the draft model's sequence (ModelSequence), able to roll back. `target_vocab`: the target's
  // vocabulary size; a draft's may differ by padding rows only: ArgumentError ("draft_model") when they differ by
  // more than 1/64 of the larger, a different tokenizer for sure. Guesses are drawn only from the ids both hold.
  DraftProposer(LogitsSource& draft, int64_t target_vocab);
  void propose(std::span<const int32_t> context, int64_t k, const Sampler& target, Proposal& out) override;

 private:
  LogitsSource& draft_;
  int64_t target_vocab_;
  std::vector<int32_t> seen_;  // the tokens in the draft's memory
  int64_t checkpoint_ = 0;     // the length the draft can roll back to
  std::vector<float> logits_;
};

// The proposer `options` ask for, owning whatever state it keeps (a draft model's sequence): one per generation or
// request. `draft` is the loaded draft model for the "draft" method (ArgumentError "draft_model" if null), unused
// otherwise; nullptr for SpeculativeMethod::none.
std::unique_ptr<Proposer> make_proposer(const SpeculativeOptions& options, const Model* draft, int64_t target_vocab);

}  // namespace attnzoo
