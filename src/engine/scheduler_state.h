#pragma once
// The scheduler's bookkeeping per request (private to scheduler*.cc): its samples, each with the tokens a
// recompute re-prefills, its sequence in the pool, its sampler and its text / stop-string state.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/scheduler.h"
#include "engine/speculative.h"
#include "tokenizer/stream_decoder.h"

namespace attnzoo {

struct Scheduler::Sample {
  int64_t index = 0;
  std::vector<int32_t> tokens;  // prompt + generated: what a recompute re-prefills
  int64_t generated = 0;
  std::unique_ptr<Sequence> seq;  // null while waiting (or finished)
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<tok::StreamDecoder> decoder;
  std::unique_ptr<StopStringMatcher> matcher;
  bool finished = false, stopped_by_text = false;
  SampleDelta delta;  // news since the last output
  // Speculative decoding: this sample's own proposer, made at its first decoding step after each admission and
  // dropped on preemption (a draft's sequence holds blocks and a state slot); null while waiting.
  std::unique_ptr<Proposer> proposer;
  bool speculation_failed = false;     // the proposer failed for good: this sample decodes without guesses
  Proposal proposal;                   // this step's guesses, verified after the forward pass

  int64_t remaining() const { return int64_t(tokens.size()) - (seq ? seq->length() : 0); }
  bool has_news() const { return !delta.token_ids.empty() || !delta.text.empty() || delta.finish_reason; }
};

struct Scheduler::RequestState {
  uint64_t id = 0;
  Request request;
  OutputCallback on_output;
  EngineClock::time_point arrival;
  std::optional<EngineClock::time_point> first_token;
  // One sample until the prompt's prefill completes, then n (forked from the first).
  std::vector<std::unique_ptr<Sample>> samples;
  bool forked = false;
  bool running = false;
  bool admitted_before = false;
  Usage usage;
  int64_t preemptions = 0;
  std::string error;

  bool done() const {
    if (!forked) return samples[0]->finished;
    for (const auto& s : samples)
      if (!s->finished) return false;
    return true;
  }
  // Sequences it holds or will hold once forked.
  int64_t sequences() const {
    int64_t k = 0;
    for (const auto& s : samples) k += s->finished ? 0 : 1;
    return forked ? k : request.params.n;
  }
};

}  // namespace attnzoo
