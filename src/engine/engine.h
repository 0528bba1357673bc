#pragma once
// The serving engine: many requests at once over one model. A thread of its own runs the scheduler loop
// (continuous batching, chunked prefill, preemption by recompute; see scheduler.h); every other thread only
// hands requests in (add_request, abort) and takes outputs out through each request's callback, which the engine
// calls on its thread and which must not block (OutputQueue is the ready-made non-blocking hand-over).
//
//   Engine engine(model, tokenizer);
//   auto q = OutputQueue::make();
//   uint64_t id = engine.add_request({prompt_ids, params}, q->callback());
//   while (auto out = q->pop(std::chrono::milliseconds(100))) { ...; if (out->finished) break; }
#include <cstdint>
#include <memory>
#include <stdexcept>

#include "engine/engine_options.h"
#include "engine/output_queue.h"
#include "engine/request.h"

namespace attnzoo {

class Model;
namespace tok {
class Tokenizer;
}
class Scheduler;

// add_request after stop(): the engine takes no more work.
struct EngineStopped : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// add_request while max_waiting_requests are already waiting (a server answers 429 / 503).
struct EngineBusy : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Engine {
 public:
  // `model` must outlive the engine, which uses its memory pool (prefix caching as the pool was configured).
  // `tokenizer` (may be null) gives outputs their text and makes stop strings possible. Starts the thread.
  Engine(const Model& model, std::shared_ptr<const tok::Tokenizer> tokenizer, EngineOptions options = {});
  ~Engine();  // stop()
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request and returns its id (unique, increasing from 1). Throws, without queuing anything:
  // ArgumentError for invalid params (naming the field), an empty prompt, ids outside the vocabulary, a prompt
  // with max_tokens past max_model_len ("prompt: 1000 tokens + max_tokens 100 exceed max_model_len 1024"),
  // stop strings without a tokenizer, or a request the memory pool could not hold even alone; EngineBusy when
  // max_waiting_requests are waiting; EngineStopped after stop(). Thread-safe, never waits for a step.
  uint64_t add_request(Request request, OutputCallback on_output);
  // Ends the request at the start of the next step: its blocks are freed and its callback gets a last output
  // with finish_reason abort for each unfinished sample. Unknown or finished ids are ignored. Thread-safe.
  void abort(uint64_t request_id);
  // A snapshot of the counters. Thread-safe, cheap.
  EngineStats stats() const;
  // Stops taking requests, aborts every unfinished one (their callbacks get the abort output) and joins the
  // thread. Idempotent.
  void stop();

  const EngineOptions& options() const;
  int64_t max_model_len() const;  // resolved (0: unlimited)
  const Model& model() const { return model_; }

 private:
  void loop();
  struct Shared;
  const Model& model_;
  std::unique_ptr<Shared> shared_;
  std::unique_ptr<Scheduler> scheduler_;
};

}  // namespace attnzoo
