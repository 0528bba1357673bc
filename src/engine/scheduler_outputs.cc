// The scheduler's output side: sampling each step's logits, forking n samples, stop conditions, streamed
// outputs, aborts and failures.
#include <algorithm>

#include "engine/logprobs.h"
#include "engine/scheduler.h"
#include "engine/scheduler_state.h"
#include "models/model.h"

namespace attnzoo {

std::unique_ptr<Scheduler::Sample> Scheduler::make_sample(const RequestState& r, int64_t index) const {
  auto s = std::make_unique<Sample>();
  s->index = index;
  s->delta.index = index;
  SamplingParams sp = r.request.params.sampling;
  sp.seed += uint64_t(index);
  s->sampler = std::make_unique<Sampler>(sp);
  if (tokenizer_) s->decoder = std::make_unique<tok::StreamDecoder>(tokenizer_, /*skip_special_tokens=*/true);
  s->matcher = std::make_unique<StopStringMatcher>(r.request.params.stop);
  return s;
}

void Scheduler::fork_samples(RequestState& r) {
  Sample& first = *r.samples[0];
  try {
    for (int64_t i = 1; i < r.request.params.n; ++i) {
      auto s = make_sample(r, i);
      s->tokens = first.tokens;
      s->seq = cache_->fork(*first.seq);
      r.samples.push_back(std::move(s));
    }
  } catch (const std::exception& e) {
    r.samples.resize(1);
    r.forked = true;
    fail(r, std::string("forking the prompt's sequence failed: ") + e.what());
    return;
  }
  r.forked = true;
}

void Scheduler::sample_next(RequestState& r, Sample& s, const float* logits, EngineClock::time_point now) {
  const int64_t V = model_.info().vocab_size;
  const std::span<const float> row(logits, size_t(V));
  int32_t token;
  try {
    token = s.sampler->sample(row, s.tokens);
  } catch (const std::exception& e) {
    fail(r, std::string("sampling failed: ") + e.what());
    return;
  }
  commit_token(r, s, token, row, now);
}

void Scheduler::commit_token(RequestState& r, Sample& s, int32_t token, std::span<const float> row,
                             EngineClock::time_point now) {
  const auto& params = r.request.params;
  if (params.logprobs) {
    RowLogprobs lp = row_logprobs(row, token, params.top_logprobs);
    s.delta.logprobs.push_back({token, lp.chosen});
    s.delta.top_logprobs.push_back(std::move(lp.top));
  }
  s.tokens.push_back(token);
  ++s.generated;
  ++counters_.generation_tokens;
  ++r.usage.completion_tokens;
  if (!r.first_token) r.first_token = now;
  s.delta.token_ids.push_back(token);
  s.delta.token_times.push_back(now);

  std::optional<FinishReason> reason;
  const bool eos = !params.ignore_eos && std::find(eos_.begin(), eos_.end(), token) != eos_.end();
  const bool stop_id = std::find(params.stop_token_ids.begin(), params.stop_token_ids.end(), token) !=
                       params.stop_token_ids.end();
  if (eos || stop_id) {
    reason = FinishReason::stop;
  } else if (s.decoder) {
    const auto step = s.matcher->push(s.decoder->push(token));
    s.delta.text += step.text;
    if (step.stopped) {
      s.stopped_by_text = true;
      reason = FinishReason::stop;
    }
  }
  if (!reason && (s.generated >= params.max_tokens || (max_model_len_ > 0 && int64_t(s.tokens.size()) >= max_model_len_)))
    reason = FinishReason::length;
  if (reason) finish_sample(r, s, *reason);
}

void Scheduler::finish_sample(RequestState&, Sample& s, FinishReason reason) {
  if (s.decoder && !s.stopped_by_text && reason != FinishReason::abort && reason != FinishReason::error) {
    const auto step = s.matcher->push(s.decoder->finish());
    s.delta.text += step.text;
    if (step.stopped)
      reason = FinishReason::stop;
    else
      s.delta.text += s.matcher->flush();
  }
  s.finished = true;
  s.delta.finish_reason = reason;
  s.seq.reset();
  s.proposer.reset();  // a draft model's sequence goes back to its pool
}

void Scheduler::fail(RequestState& r, const std::string& why) {
  r.error = why;
  for (auto& s : r.samples)
    if (!s->finished) finish_sample(r, *s, FinishReason::error);
  ++counters_.failed_requests;
}

void Scheduler::deliver(RequestState& r) {
  // A request that ends before it forked still reports every one of its n samples.
  if (!r.forked && r.samples[0]->finished) {
    const auto reason = r.samples[0]->delta.finish_reason;
    for (int64_t i = 1; i < r.request.params.n; ++i) {
      auto s = make_sample(r, i);
      s->finished = true;
      s->delta.finish_reason = reason;
      r.samples.push_back(std::move(s));
    }
    r.forked = true;
  }
  RequestOutput out;
  for (auto& s : r.samples) {
    if (!s->has_news()) continue;
    out.samples.push_back(std::move(s->delta));
    s->delta = SampleDelta{};
    s->delta.index = s->index;
  }
  out.finished = r.done();
  if (out.samples.empty() && !out.finished) return;
  out.request_id = r.id;
  out.error = r.error;
  out.usage = r.usage;
  out.arrival = r.arrival;
  out.first_token = r.first_token;
  if (out.finished) out.finish = EngineClock::now();
  out.preemptions = r.preemptions;
  if (!r.on_output) return;
  try {
    r.on_output(std::move(out));
  } catch (...) {
    // A consumer's failure must not stop the engine; the request simply runs on unobserved.
  }
}

std::vector<std::unique_ptr<Scheduler::RequestState>> Scheduler::retire_finished() {
  std::vector<std::unique_ptr<RequestState>> retired;
  for (auto it = running_.begin(); it != running_.end();) {
    if ((*it)->done()) {
      if ((*it)->error.empty()) ++counters_.finished_requests;
      retired.push_back(std::move(*it));
      it = running_.erase(it);
    } else {
      ++it;
    }
  }
  return retired;
}

bool Scheduler::abort(uint64_t id) {
  std::unique_ptr<RequestState> r;
  for (auto it = running_.begin(); it != running_.end() && !r; ++it) {
    if ((*it)->id == id) {
      r = std::move(*it);
      running_.erase(it);
      break;
    }
  }
  for (auto it = waiting_.begin(); it != waiting_.end() && !r; ++it) {
    if ((*it)->id == id) {
      r = std::move(*it);
      waiting_.erase(it);
      break;
    }
  }
  if (!r) return false;
  for (auto& s : r->samples)
    if (!s->finished) finish_sample(*r, *s, FinishReason::abort);
  ++counters_.aborted_requests;
  if (before_outputs_) before_outputs_();
  deliver(*r);
  return true;
}

void Scheduler::abort_all() {
  while (!running_.empty()) abort(running_.front()->id);
  while (!waiting_.empty()) abort(waiting_.front()->id);
}

EngineStats Scheduler::stats() const {
  EngineStats s = counters_;
  s.running_requests = int64_t(running_.size());
  s.waiting_requests = int64_t(waiting_.size());
  s.running_sequences = 0;
  for (const auto& r : running_)
    for (const auto& x : r->samples) s.running_sequences += x->seq ? 1 : 0;
  const PoolStats ps = cache_->stats();
  s.num_blocks = ps.num_blocks;
  s.free_blocks = ps.free_blocks;
  s.kv_cache_usage = ps.num_blocks > 0 ? double(ps.num_blocks - ps.free_blocks) / double(ps.num_blocks) : 0.0;
  return s;
}

}  // namespace attnzoo
