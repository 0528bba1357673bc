#include "engine/speculative.h"

#include <algorithm>

#include "core/error.h"

namespace attnzoo {

void SpeculativeOptions::validate() const {
  if (!enabled()) return;
  require(num_speculative_tokens >= 1 && num_speculative_tokens <= 64, "num_speculative_tokens",
          "must be in [1, 64] with speculative decoding on, got " + std::to_string(num_speculative_tokens));
  if (method == SpeculativeMethod::ngram) {
    require(prompt_lookup_min >= 1, "prompt_lookup_min", "must be >= 1, got " + std::to_string(prompt_lookup_min));
    require(prompt_lookup_max >= prompt_lookup_min, "prompt_lookup_max",
            "must be >= prompt_lookup_min (" + std::to_string(prompt_lookup_min) + "), got " +
                std::to_string(prompt_lookup_max));
  }
}

SpeculativeMethod parse_speculative_method(const std::string& name, const std::string& what) {
  if (name == "ngram") return SpeculativeMethod::ngram;
  if (name == "draft" || name == "draft_model") return SpeculativeMethod::draft;
  if (name == "none" || name.empty()) return SpeculativeMethod::none;
  throw ArgumentError(what + ": expected 'ngram', 'draft' or 'none', got '" + name + "'");
}

void SpeculativeStats::add(int64_t proposed, int64_t accepted) {
  if (proposed <= 0) return;
  ++drafts;
  draft_tokens += proposed;
  accepted_tokens += accepted;
  if (int64_t(accepted_per_position.size()) < proposed) accepted_per_position.resize(size_t(proposed), 0);
  for (int64_t i = 0; i < accepted; ++i) ++accepted_per_position[size_t(i)];
}

int32_t draw_from_probabilities(std::span<const float> probs, double uniform) {
  double total = 0.0;
  for (float p : probs) total += double(p);
  require(total > 0.0, "probs", "have no mass to draw from");
  const double u = uniform * total;
  double cum = 0.0;
  int32_t last_positive = -1;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0.f) continue;
    cum += double(probs[i]);
    last_positive = int32_t(i);
    if (u < cum) return last_positive;
  }
  return last_positive;  // rounding left u a hair past the total
}

std::vector<int32_t> verify_proposal(std::span<const float> logits, int64_t vocab, std::span<const int32_t> context,
                                     const Proposal& proposal, Sampler& sampler) {
  const size_t n = proposal.tokens.size();
  require(proposal.q.empty() || proposal.q.size() == n, "proposal", "needs one q row per guess, or none");
  require(int64_t(logits.size()) == int64_t(n + 1) * vocab, "logits",
          "must hold " + std::to_string(n + 1) + " rows of " + std::to_string(vocab) + " (one per guess, plus one)");
  // Penalties see each guess before the row that follows it, exactly as token-by-token sampling would.
  std::vector<int32_t> ctx(context.begin(), context.end());
  std::vector<int32_t> out;
  std::vector<float> p;
  for (size_t i = 0; i < n; ++i) {
    const auto row = logits.subspan(i * size_t(vocab), size_t(vocab));
    const int32_t d = proposal.tokens[i];
    if (proposal.q.empty()) {
      // A point-mass guess: the position's own draw decides, so the output is sampling's, guess or no guess.
      const int32_t x = sampler.sample(row, ctx);
      out.push_back(x);
      if (x != d) return out;
      ctx.push_back(d);
      continue;
    }
    sampler.probabilities(row, ctx, p);
    const std::vector<float>& q = proposal.q[i];
    const double pd = d >= 0 && d < vocab ? double(p[size_t(d)]) : 0.0;
    const double qd = d >= 0 && size_t(d) < q.size() ? double(q[size_t(d)]) : 0.0;
    // Accept with probability min(1, p/q).
    if (qd > 0.0 && (pd >= qd || sampler.uniform(DrawPurpose::accept) * qd < pd)) {
      out.push_back(d);
      ctx.push_back(d);
      sampler.seek(sampler.position() + 1);
      continue;
    }
    // Rejected: the residual max(0, p - q) holds exactly the mass the guess failed to cover.
    double mass = 0.0;
    for (size_t t = 0; t < p.size(); ++t) {
      p[t] = std::max(0.f, p[t] - (t < q.size() ? q[t] : 0.f));
      mass += double(p[t]);
    }
    // p == q up to rounding leaves nothing: then the rejection itself had probability ~0; p is the answer.
    if (mass <= 0.0) sampler.probabilities(row, ctx, p);
    out.push_back(draw_from_probabilities(p, sampler.uniform(DrawPurpose::residual)));
    sampler.seek(sampler.position() + 1);
    return out;
  }
  out.push_back(sampler.sample(logits.subspan(n * size_t(vocab), size_t(vocab)), ctx));  // every guess kept: bonus
  return out;
}

}  // namespace attnzoo
