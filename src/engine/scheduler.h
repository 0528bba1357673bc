#pragma once
// Continuous batching over a model's memory pool (vLLM's scheduler, recompute policy). Every step re-forms the
// batch: running sequences first, decodes before prefill chunks, then waiting requests are admitted in arrival
// order while the step's token budget, the sequence cap and the pool allow. A prompt longer than what is left of
// the budget is split across steps (chunked prefill). When the pool cannot hold a running sequence's next step,
// the newest running request is preempted: its sequences are freed and it goes back to the front of the queue,
// to be recomputed later (prompt + generated tokens re-prefilled; the prefix cache usually returns most of it).
// n > 1 runs the prompt once and forks its sequence into n samples (shared blocks, copy on write).
//
// Single-threaded: the Engine runs it on its own thread; tests drive it step by step.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "engine/engine_options.h"
#include "engine/json_constraint.h"
#include "engine/request.h"
#include "engine/sampler.h"
#include "engine/stop.h"
#include "layers/batch.h"
#include "state/cache_manager.h"
#include "state/sequence.h"

namespace attnzoo {

class Model;
namespace tok {
class Tokenizer;
class StreamDecoder;
}  // namespace tok

// What one step ran (for tests and tracing).
struct StepReport {
  struct Chunk {
    uint64_t request_id = 0;
    int64_t sample = 0;
    int64_t num_tokens = 0;
    bool decode = false;  // one token after the sample's prompt was prefilled
  };
  std::vector<Chunk> chunks;
  int64_t num_tokens = 0;
  std::vector<uint64_t> preempted;  // requests preempted while planning this step
  std::vector<uint64_t> admitted;   // requests that left the waiting queue this step
};

class Scheduler {
 public:
  Scheduler(const Model& model, std::shared_ptr<const tok::Tokenizer> tokenizer, EngineOptions options);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // ArgumentError for a request that could never run (see Engine::add_request).
  void check(const Request& request) const;
  // Builds what a shaped request's mask reads (every token's bytes and their trie: 0.04 s on a 49k vocabulary),
  // once per scheduler; safe on any thread. Engine::add_request calls it on the caller's thread so the first
  // JSON request does not stall every running sequence's step; add() calls it too for callers without an engine.
  void prepare(const Request& request);
  // Queues a checked request.
  void add(uint64_t id, Request request, OutputCallback on_output, EngineClock::time_point arrival);
  // Frees the request's sequences and sends its last output (finish_reason abort). False if unknown / finished.
  bool abort(uint64_t id);
  void abort_all();

  bool has_work() const { return !running_.empty() || !waiting_.empty(); }
  // Plans and runs one forward pass, samples, and calls the callbacks of requests with news.
  StepReport step();

  EngineStats stats() const;  // counters and queue sizes (pool numbers read from the pool)
  // Called once the step's (or abort's) state is final and before any callback hears of it, so whoever reads
  // stats() there publishes numbers that are never older than the outputs a client has seen.
  void set_before_outputs(std::function<void()> hook) { before_outputs_ = std::move(hook); }
  const EngineOptions& options() const { return options_; }
  int64_t max_model_len() const { return max_model_len_; }

 private:
  struct Sample;
  struct RequestState;
  struct Planned {
    RequestState* request;
    Sample* sample;
    int64_t num_tokens;  // with speculation: the pending token and the guesses after it
    int64_t guesses = 0;
  };

  std::vector<Planned> plan(StepReport& report);
  // Whether the pool can hold `sample`'s next `num_tokens` on top of what is planned (and tentatively planned).
  bool fits(std::span<const Planned> planned, std::span<const Planned> tentative, Sample& sample,
            int64_t num_tokens) const;
  void schedule_running(std::vector<Planned>& planned, int64_t& budget, StepReport& report);
  void admit_waiting(std::vector<Planned>& planned, int64_t& budget, StepReport& report);
  void preempt(RequestState& r, std::vector<Planned>& planned, int64_t& budget);
  void run(const std::vector<Planned>& planned, StepReport& report);
  // The step's tokens from its logits (Model::forward_logits, on the host or a GPU): the plain samples in one
  // sample_rows call where the logits are, then, in step order, each sample's token committed, the speculative
  // rows verified and the logprobs rows sampled on the host (on a GPU only those rows are copied down).
  void sample_step(const TensorView& logits, EngineClock::time_point now);
  // The row a shaped sample (logit_bias, JSON mode, the ends min_tokens bans) draws from, in shaped_row_; false
  // with `why` set when JSON mode leaves no token to draw.
  bool shape_row(const RequestState& r, const Sample& s, const float* row, std::string& why);
  // How many of the rows deciding `s`'s next `rows` tokens come before its min_tokens (and there are ids to ban).
  int64_t rows_banning_ends(const RequestState& r, const Sample& s, int64_t rows) const;
  // Sets the ids that would end `s` (EOS, stop_token_ids) to -inf in `row`.
  void ban_ends(const RequestState& r, std::span<float> row) const;
  // Records one new token of a sample (logprobs from its row), with the stop checks; finishes the sample if so.
  void commit_token(RequestState& r, Sample& s, int32_t token, std::span<const float> row, EngineClock::time_point now);
  // Up to num_speculative_tokens guesses for a decoding sample, within `budget` extra tokens; how many.
  int64_t propose(RequestState& r, Sample& s, int64_t budget);
  // A speculating sample after the forward pass: the rejection rule over its rows, rollback, the kept tokens.
  void verify(RequestState& r, Sample& s, int64_t length_before, const float* rows, EngineClock::time_point now);
  // A rollback point before a verification pass; false (guesses dropped) when the pool has no slot for one.
  bool checkpoint_for_rollback(Sample& s);
  void fork_samples(RequestState& r);
  void finish_sample(RequestState& r, Sample& s, FinishReason reason);
  void fail(RequestState& r, const std::string& why);
  void deliver(RequestState& r);
  std::vector<std::unique_ptr<RequestState>> retire_finished();
  int64_t live_sequences() const;
  // Every running sequence must be able to decode in every step, so no more run than a step has tokens.
  int64_t seq_cap() const { return std::min(options_.max_num_seqs, options_.max_num_batched_tokens); }
  std::unique_ptr<Sample> make_sample(const RequestState& r, int64_t index) const;

  const Model& model_;
  // The bookkeeping of the model's memory pool, held here: the scheduler decides which sequences get blocks and
  // state slots (admission, chunk sizes, preemption, forks, speculative checkpoints) and reserves each step's
  // blocks itself; the model only computes over the block tables it is handed.
  std::shared_ptr<CacheManager> cache_;
  std::shared_ptr<const tok::Tokenizer> tokenizer_;
  EngineOptions options_;
  int64_t max_model_len_ = 0;
  std::vector<int32_t> eos_;
  std::list<std::unique_ptr<RequestState>> running_;  // admission order: the back is the newest
  std::deque<std::unique_ptr<RequestState>> waiting_;  // arrival order; preempted requests return to the front
  EngineStats counters_;
  // Scratch reused by every step's planning, so a step allocates nothing there once warm.
  mutable std::vector<Sequence*> fit_seqs_;
  mutable std::vector<int64_t> fit_counts_;
  std::vector<int64_t> step_counts_;
  std::vector<RequestState*> running_order_;
  std::vector<Planned> tentative_;
  // The step's batch and host logits, reused: the model writes into them without a vocabulary-sized vector per
  // step (on a GPU, logits_ holds only the rows copied down: verification and logprobs).
  Batch batch_;
  std::vector<float> logits_;
  // A sample with a row of the step's logits to read: its next token, or (verify_rows > 0) the rows of its
  // pending token and guesses, verified. In step order, the n samples of a fork one after another.
  struct StepRow {
    RequestState* request;
    Sample* sample;
    int64_t row;
    int64_t verify_rows = 0;
    int64_t length_before = 0;  // the sequence's length before a verification pass
  };
  std::vector<StepRow> step_rows_;
  // sample_rows' arguments and results for the step's plain samples (step_rows_ entries draw_of_).
  std::vector<size_t> draw_of_;
  std::vector<int64_t> draw_rows_;
  std::vector<Sampler*> draw_samplers_;
  std::vector<std::span<const int32_t>> draw_contexts_;
  std::vector<int32_t> draw_tokens_;
  std::vector<std::string> draw_errors_;
  std::function<void()> before_outputs_;
  // JSON mode: every token's bytes and their trie (built once by prepare()), and the step's scratch
  // for a shaped row (logit_bias added, the mask applied) and the tokens the mask allows.
  std::vector<std::string> json_token_bytes_;
  std::unique_ptr<TokenTrie> json_trie_;
  std::once_flag json_trie_once_;
  std::vector<float> shaped_row_;
  std::vector<uint8_t> allowed_;
  std::vector<float> verified_rows_;  // a verification's rows with min_tokens' bans (the raw ones give logprobs)
};

}  // namespace attnzoo
