// The scheduler's speculative decoding: guesses planned with each decoding sample, verified after the step's
// forward pass by the rejection rule (engine/speculative.h), the sequence rolled back to its last kept token.
#include <algorithm>

#include "engine/draft_proposer.h"
#include "engine/scheduler.h"
#include "engine/scheduler_state.h"
#include "models/model.h"

namespace attnzoo {

int64_t Scheduler::propose(RequestState& r, Sample& s, int64_t budget) {
  s.proposal.tokens.clear();
  s.proposal.q.clear();
  const auto& params = r.request.params;
  // A pass yields the kept guesses and one token more; the pending token is already counted in `generated`.
  // Guesses past max_tokens or max_model_len would be thrown away (the same bounds as generate()).
  int64_t k = std::min({options_.speculative.num_speculative_tokens, budget, params.max_tokens - s.generated - 1});
  if (max_model_len_ > 0) k = std::min<int64_t>(k, max_model_len_ - int64_t(s.tokens.size()) - 1);
  if (k <= 0) return 0;
  // A draft whose own pool is full only costs this step its guesses (it is tried again next step); any other
  // failure costs the sample its speculation. Either way the output stays exact.
  try {
    if (!s.proposer) s.proposer = make_proposer(options_.speculative, options_.draft_model, model_.info().vocab_size);
    s.proposer->propose(s.tokens, k, *s.sampler, s.proposal);
  } catch (const PoolExhausted&) {
    s.proposal.tokens.clear();
    return 0;
  } catch (const std::exception&) {
    s.proposer.reset();
    s.speculation_failed = true;
    s.proposal.tokens.clear();
    return 0;
  }
  return int64_t(s.proposal.tokens.size());
}

bool Scheduler::checkpoint_for_rollback(Sample& s) {
  CacheManager& pool = *cache_;
  pool.clear_checkpoints(*s.seq);
  // Admission set state slots aside for the forks of running requests whose prompt has not finished (one may
  // finish in this very step and fork after it): a checkpoint taking one would fail that request's fork.
  int64_t owed = 0;
  for (const auto& r : running_)
    if (!r->forked) owed += r->request.params.n - 1;
  try {
    pool.checkpoint(*s.seq, owed);
    return true;
  } catch (const PoolExhausted&) {
    s.proposal.tokens.clear();
    return false;
  }
}

void Scheduler::verify(RequestState& r, Sample& s, int64_t length_before, const float* rows,
                       EngineClock::time_point now) {
  const int64_t V = model_.info().vocab_size, n = int64_t(s.proposal.tokens.size());
  std::vector<int32_t> kept;
  // min_tokens: row i decides the sample's token generated + i, banned as a plain step there would ban it; the
  // rows as computed still give the logprobs.
  std::span<const float> verified(rows, size_t((n + 1) * V));
  if (const int64_t banned = rows_banning_ends(r, s, n + 1); banned > 0) {
    verified_rows_.assign(verified.begin(), verified.end());
    for (int64_t i = 0; i < banned; ++i) ban_ends(r, std::span(verified_rows_).subspan(size_t(i * V), size_t(V)));
    verified = verified_rows_;
  }
  try {
    kept = verify_proposal(verified, V, s.tokens, s.proposal, *s.sampler);
    model_.rollback(*s.seq, length_before + int64_t(kept.size()));
    cache_->clear_checkpoints(*s.seq);
  } catch (const std::exception& e) {
    fail(r, std::string("speculative verification failed: ") + e.what());
    return;
  }
  s.proposal.tokens.clear();
  size_t committed = 0;
  for (; committed < kept.size() && !s.finished; ++committed)
    commit_token(r, s, kept[committed], std::span(rows + committed * size_t(V), size_t(V)), now);
  // Guesses kept after an EOS or a stop in the same run were never output: not accepted.
  counters_.speculative.add(n, std::min<int64_t>(int64_t(committed), int64_t(kept.size()) - 1));
}

}  // namespace attnzoo
