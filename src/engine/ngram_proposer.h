#pragma once
// Prompt lookup (vLLM's "ngram" method): the last n tokens of the context are searched for earlier in the prompt
// and output, n from prompt_lookup_max down to prompt_lookup_min; the first (earliest) match proposes the up to
// k tokens that followed it. Guesses are deterministic: verification keeps one when the position's own draw picks it.
#include <cstdint>
#include <span>
#include <vector>

#include "engine/speculative.h"

namespace attnzoo {

// The tokens that followed the earliest earlier occurrence of the context's last n tokens, for the largest n in
// [n_min, n_max] that has one; at most k of them; empty when no n-gram recurs.
std::vector<int32_t> ngram_lookup(std::span<const int32_t> context, int64_t k, int64_t n_min, int64_t n_max);

class NgramProposer : public Proposer {
 public:
  NgramProposer(int64_t n_min, int64_t n_max) : n_min_(n_min), n_max_(n_max) {}
  void propose(std::span<const int32_t> context, int64_t k, const Sampler&, Proposal& out) override {
    out.tokens = ngram_lookup(context, k, n_min_, n_max_);
    out.q.clear();
  }

 private:
  int64_t n_min_, n_max_;
};

}  // namespace attnzoo
