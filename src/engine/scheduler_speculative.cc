// The scheduler's speculative decoding: guesses planned with each decoding sample, verified after the step's
// forward pass by the rejection rule (engine/speculative.h), the sequence rolled back to its last kept token.
#include <algorithm>

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
  try {
    s.proposer->propose(s.tokens, k, s.sampler->params(), s.sampler->rng(), s.proposal);
  } catch (const std::exception&) {
    // A draft that fails (its own pool full, say) only costs this sample its speculation; the output is exact.
    s.proposer.reset();
    s.proposal.tokens.clear();
    return 0;
  }
  return int64_t(s.proposal.tokens.size());
}

bool Scheduler::checkpoint_for_rollback(Sample& s) {
  MemoryPool& pool = model_.pool();
  pool.clear_checkpoints(*s.seq);
  try {
    pool.checkpoint(*s.seq);
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
  try {
    kept = verify_proposal(std::span(rows, size_t((n + 1) * V)), V, s.tokens, s.proposal, *s.sampler);
    model_.rollback(*s.seq, length_before + int64_t(kept.size()));
    model_.pool().clear_checkpoints(*s.seq);
  } catch (const std::exception& e) {
    fail(r, std::string("speculative verification failed: ") + e.what());
    return;
  }
  counters_.speculative.add(n, int64_t(kept.size()) - 1);
  s.proposal.tokens.clear();
  for (size_t i = 0; i < kept.size() && !s.finished; ++i)
    commit_token(r, s, kept[i], std::span(rows + i * size_t(V), size_t(V)), now);
}

}  // namespace attnzoo
