// The scheduler's output side: sampling each step's logits, forking n samples, stop conditions, streamed
// outputs, aborts and failures.
#include <algorithm>
#include <utility>

#include "core/device.h"
#include "engine/logprobs.h"
#include "engine/sample_rows.h"
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
  s->sampler = std::make_unique<Sampler>(sp, int64_t(r.request.prompt.size()));
  if (tokenizer_)
    s->decoder = std::make_unique<tok::StreamDecoder>(tokenizer_, r.request.params.skip_special_tokens);
  s->matcher = std::make_unique<StopStringMatcher>(r.request.params.stop);
  const RequestParams& p = r.request.params;
  if (p.response_format == ResponseFormat::json_object) s->json.emplace();
  if (p.response_format == ResponseFormat::json_schema) s->schema.emplace(*p.json_schema, p.json_sequence.get());
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

void Scheduler::sample_step(const TensorView& logits, EngineClock::time_point now) {
  const int64_t V = model_.info().vocab_size;
  const bool on_device = logits.device.is_cuda();
  // Verification and logprobs read whole rows on the host: on a GPU those rows alone come down, each into its
  // own place in logits_ (which forward_logits sized for every row).
  const float* host = on_device ? logits_.data() : logits.ptr<const float>();
  const auto needs_host = [this](const StepRow& e) {
    const auto& p = e.request->request.params;
    return e.verify_rows > 0 || p.logprobs || shapes_logits(p) || rows_banning_ends(*e.request, *e.sample, 1) > 0;
  };
  if (on_device) {
    const DeviceGuard on(logits.device);  // the model's device's stream: after its step
    int64_t copied = -1;  // the n samples of a fork share a row: it comes down once
    for (const StepRow& e : step_rows_) {
      if (!needs_host(e) || e.row == copied) continue;
      const int64_t count = std::max<int64_t>(e.verify_rows, 1);
      for (int64_t k = 0; k < count; ++k)
        copy_bytes(logits_.data() + size_t(e.row + k) * size_t(V), Device::cpu(),
                   logits.ptr<const float>() + (e.row + k) * logits.stride(0), logits.device, size_t(V) * sizeof(float),
                   current_stream());
      copied = e.row;
    }
  }
  // Every plain sample in one call where the logits are; a row the sampler refuses fails its request alone.
  draw_of_.clear();
  draw_rows_.clear();
  draw_samplers_.clear();
  draw_contexts_.clear();
  for (size_t k = 0; k < step_rows_.size(); ++k) {
    const StepRow& e = step_rows_[k];
    if (needs_host(e)) continue;
    draw_of_.push_back(k);
    draw_rows_.push_back(e.row);
    draw_samplers_.push_back(e.sample->sampler.get());
    draw_contexts_.emplace_back(e.sample->tokens);
  }
  draw_tokens_.resize(draw_rows_.size());
  draw_errors_.resize(draw_rows_.size());
  std::string call_failed;
  if (!draw_rows_.empty()) {
    try {
      sample_rows(logits, draw_rows_, draw_samplers_, draw_contexts_, draw_tokens_, draw_errors_);
    } catch (const std::exception& e) {
      call_failed = e.what();
    }
  }
  size_t d = 0;
  for (size_t k = 0; k < step_rows_.size(); ++k) {
    const StepRow& e = step_rows_[k];
    RequestState& r = *e.request;
    Sample& s = *e.sample;
    const float* row = host + size_t(e.row) * size_t(V);
    const bool drawn = d < draw_of_.size() && draw_of_[d] == k;
    const size_t at = d;
    if (drawn) ++d;
    if (s.finished) continue;  // its request failed on an earlier sample of the fork
    if (e.verify_rows > 0) {
      verify(r, s, e.length_before, row, now);
      continue;
    }
    int32_t token = -1;
    std::string why;
    if (drawn) {
      token = draw_tokens_[at];
      why = call_failed.empty() ? draw_errors_[at] : call_failed;
    } else {
      try {
        std::span<const float> draw(row, size_t(V));
        if ((shapes_logits(r.request.params) || rows_banning_ends(r, s, 1) > 0) && shape_row(r, s, row, why))
          draw = shaped_row_;
        if (why.empty()) token = s.sampler->sample(draw, s.tokens);
      } catch (const std::exception& ex) {
        why = ex.what();
      }
    }
    if (!why.empty()) {
      fail(r, "sampling failed: " + why);
      continue;
    }
    commit_token(r, s, token, drawn ? std::span<const float>() : std::span(row, size_t(V)), now);
  }
}

bool Scheduler::shape_row(const RequestState& r, const Sample& s, const float* row, std::string& why) {
  const int64_t V = model_.info().vocab_size;
  const auto& params = r.request.params;
  shaped_row_.assign(row, row + V);
  for (const auto& [id, bias] : params.logit_bias) shaped_row_[size_t(id)] += bias;
  const bool too_short = rows_banning_ends(r, s, 1) > 0;
  if (too_short) ban_ends(r, shaped_row_);
  if (!s.json && !s.schema) return true;
  int64_t count = s.json ? json_trie_->allowed(*s.json, allowed_) : json_trie_->allowed(*s.schema, allowed_);
  // The object is not complete while a sample draws (it ends as the object closes), so the ids that would end it
  // early go: the stop ids and the EOS ids (most are special tokens, empty in the trie anyway; not every one is).
  // A schema's document may be whole and still go on (a top-level number): there they are allowed instead.
  const uint8_t end = s.schema && s.schema->can_end() && !too_short;
  for (int32_t id : params.stop_token_ids) count += end - std::exchange(allowed_[size_t(id)], end);
  if (!params.ignore_eos)
    for (int32_t id : eos_)
      if (id >= 0 && id < V) count += end - std::exchange(allowed_[size_t(id)], end);
  if (count == 0) {
    why = s.json ? "response_format json_object: no token of the vocabulary continues the JSON text"
                 : "response_format json_schema: no token of the vocabulary continues the schema's document";
    return false;
  }
  mask_row(shaped_row_, allowed_);
  return true;
}

int64_t Scheduler::rows_banning_ends(const RequestState& r, const Sample& s, int64_t rows) const {
  const RequestParams& p = r.request.params;
  if (eos_.empty() && p.stop_token_ids.empty()) return 0;
  return std::clamp<int64_t>(p.min_tokens - s.generated, 0, rows);
}

void Scheduler::ban_ends(const RequestState& r, std::span<float> row) const {
  // vLLM bans the EOS ids under ignore_eos too: min_tokens says when an end may be drawn, not whether it ends.
  suppress_tokens(row, eos_);
  suppress_tokens(row, r.request.params.stop_token_ids);
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
    const auto step = s.matcher->push(s.decoder->push(token), s.generated > params.min_tokens);
    s.delta.text += step.text;
    if (step.stopped) {
      s.stopped_by_text = true;
      reason = FinishReason::stop;
    }
  }
  // The mask let only tokens the recognizer accepts through, and EOS / stop ids only where a schema's document may
  // end (they end the sample, so what they push is never read); the document's last byte ends the sample.
  const auto follow = [&](auto& recognizer) {
    recognizer.push(json_token_bytes_[size_t(token)]);
    if (!reason && recognizer.complete()) reason = FinishReason::stop;
  };
  if (s.json) follow(*s.json);
  if (s.schema) follow(*s.schema);
  if (!reason && (s.generated >= params.max_tokens || (max_model_len_ > 0 && int64_t(s.tokens.size()) >= max_model_len_)))
    reason = FinishReason::length;
  if (reason) finish_sample(r, s, *reason);
}

void Scheduler::finish_sample(RequestState& r, Sample& s, FinishReason reason) {
  if (s.decoder && !s.stopped_by_text && reason != FinishReason::abort && reason != FinishReason::error) {
    const auto step = s.matcher->push(s.decoder->finish(), s.generated > r.request.params.min_tokens);
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
