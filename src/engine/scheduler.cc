#include "engine/scheduler.h"

#include <algorithm>

#include "core/error.h"
#include "core/tensor.h"
#include "engine/scheduler_state.h"
#include "models/model.h"

namespace attnzoo {

Scheduler::Scheduler(const Model& model, std::shared_ptr<const tok::Tokenizer> tokenizer, EngineOptions options)
    : model_(model), cache_(model.shared_cache()), tokenizer_(std::move(tokenizer)), options_(std::move(options)) {
  options_.validate();
  const int64_t positions = model_.info().max_position_embeddings;
  // As vLLM: no sequence may run past the positions the model was trained for (0: the config sets no bound).
  require(positions <= 0 || options_.max_model_len <= positions, "max_model_len",
          std::to_string(options_.max_model_len) + " is more than the model's context of " + std::to_string(positions) +
              " (" + kContextOrigin + ")");
  max_model_len_ = options_.max_model_len > 0 ? options_.max_model_len : positions;
  eos_ = options_.eos_token_ids;
  if (eos_.empty() && tokenizer_) eos_ = tokenizer_->eos_token_ids();
  // A verification pass of k + 1 tokens may be rolled back whole, also on a sliding-window model.
  if (options_.speculative.enabled())
    cache_->keep_rollback_tokens(options_.speculative.num_speculative_tokens + 1);
}

Scheduler::~Scheduler() = default;

void Scheduler::check(const Request& request) const {
  const auto& p = request.params;
  p.validate();
  const int64_t P = int64_t(request.prompt.size()), V = model_.info().vocab_size;
  require(P > 0, "prompt", "is empty: generation needs at least one token to condition on");
  for (int32_t id : request.prompt)
    require(id >= 0 && id < V, "prompt",
            "token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(V) + ")");
  // An id outside the vocabulary could never be sampled: the stop would silently never happen.
  for (int32_t id : p.stop_token_ids)
    require(id >= 0 && id < V, "stop_token_ids",
            "token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(V) + ")");
  require(p.stop.empty() || tokenizer_ != nullptr, "stop", "stop strings need the engine to have a tokenizer");
  for (const auto& [id, bias] : p.logit_bias)
    require(id < V, "logit_bias",
            "token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(V) + ")");
  require(p.response_format == ResponseFormat::text || tokenizer_ != nullptr, "response_format",
          "JSON mode needs the engine to have a tokenizer (it masks tokens by their bytes)");
  require(p.n <= seq_cap(), "n",
          std::to_string(p.n) + " samples exceed max_num_seqs " + std::to_string(options_.max_num_seqs) +
              (seq_cap() < options_.max_num_seqs
                   ? " (capped at max_num_batched_tokens " + std::to_string(options_.max_num_batched_tokens) + ")"
                   : std::string()));
  if (max_model_len_ > 0)
    require(P + p.max_tokens <= max_model_len_, "prompt",
            std::to_string(P) + " tokens + max_tokens " + std::to_string(p.max_tokens) + " exceed max_model_len " +
                std::to_string(max_model_len_));
  const CacheManager& pool = *cache_;
  const PoolStats st = pool.stats();
  if (pool.has_state())
    require(p.n <= st.state_slots, "n",
            std::to_string(p.n) + " samples need as many state slots; the pool has " + std::to_string(st.state_slots));
  if (pool.has_paged()) {
    // The last sampled token is never written: a sample holds prompt + max_tokens - 1 tokens at most; samples
    // share the prompt's full blocks. Sliding-window layers hold their window and one step's tokens.
    const int64_t B = pool.block_tokens();
    int64_t step = options_.enable_chunked_prefill ? std::min(P, options_.max_num_batched_tokens) : P;
    if (options_.speculative.enabled()) step = std::max(step, options_.speculative.num_speculative_tokens + 1);
    const int64_t need = pool.blocks_at_most(P, P + p.max_tokens - 1, p.n, step);
    require(need <= st.num_blocks, "prompt",
            std::to_string(P) + " tokens + max_tokens " + std::to_string(p.max_tokens) + " x n " +
                std::to_string(p.n) + " need " + std::to_string(need) + " blocks of " + std::to_string(B) +
                " tokens; the whole memory pool has " + std::to_string(st.num_blocks));
  }
}

void Scheduler::prepare(const Request& request) {
  if (request.params.response_format == ResponseFormat::text) return;
  std::call_once(json_trie_once_, [this] {
    json_token_bytes_ = token_bytes_in_context(*tokenizer_, model_.info().vocab_size);
    json_trie_ = std::make_unique<TokenTrie>(json_token_bytes_);
  });
}

void Scheduler::add(uint64_t id, Request request, OutputCallback on_output, EngineClock::time_point arrival) {
  auto r = std::make_unique<RequestState>();
  r->id = id;
  r->request = std::move(request);
  r->on_output = std::move(on_output);
  r->arrival = arrival;
  r->forked = r->request.params.n == 1;
  r->usage.prompt_tokens = int64_t(r->request.prompt.size());
  prepare(r->request);
  auto s = make_sample(*r, 0);
  s->tokens = r->request.prompt;
  r->samples.push_back(std::move(s));
  waiting_.push_back(std::move(r));
}

int64_t Scheduler::live_sequences() const {
  int64_t k = 0;
  for (const auto& r : running_) k += r->sequences();
  return k;
}

bool Scheduler::fits(std::span<const Planned> planned, std::span<const Planned> tentative, Sample& sample,
                     int64_t num_tokens) const {
  fit_seqs_.clear();
  fit_counts_.clear();
  for (std::span<const Planned> part : {planned, tentative}) {
    for (const auto& p : part) {
      fit_seqs_.push_back(p.sample->seq.get());
      fit_counts_.push_back(p.num_tokens);
    }
  }
  fit_seqs_.push_back(sample.seq.get());
  fit_counts_.push_back(num_tokens);
  return cache_->blocks_needed(fit_seqs_, fit_counts_) <= cache_->stats().free_blocks;
}

void Scheduler::preempt(RequestState& r, std::vector<Planned>& planned, int64_t& budget) {
  for (auto it = planned.begin(); it != planned.end();) {
    if (it->request == &r) {
      budget += it->num_tokens;
      it = planned.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& s : r.samples) {
    s->seq.reset();
    s->proposer.reset();  // a draft's sequence goes back to its pool; the next admission makes a new one
    s->proposal.tokens.clear();
  }
  r.running = false;
  ++r.preemptions;
  ++counters_.preemptions;
  for (auto it = running_.begin(); it != running_.end(); ++it) {
    if (it->get() == &r) {
      waiting_.push_front(std::move(*it));
      running_.erase(it);
      break;
    }
  }
}

void Scheduler::schedule_running(std::vector<Planned>& planned, int64_t& budget, StepReport& report) {
  // Preemption moves requests out of running_ while this walks them: walk a copy (kept across steps).
  std::vector<RequestState*>& order = running_order_;
  order.clear();
  for (auto& r : running_) order.push_back(r.get());
  for (int pass = 0; pass < 2; ++pass) {
    const bool decode_pass = pass == 0;
    for (RequestState* r : order) {
      for (size_t i = 0; i < r->samples.size() && r->running; ++i) {
        Sample& s = *r->samples[i];
        if (s.finished || !s.seq) continue;
        const int64_t rem = s.remaining();
        if (decode_pass != (rem == 1)) continue;
        int64_t n = std::min(rem, budget);
        if (!decode_pass && !options_.enable_chunked_prefill && rem > budget) {
          if (!planned.empty()) continue;
          n = rem;
        }
        if (n <= 0) continue;
        // A sample whose rows the scheduler shapes (logit_bias, JSON mode) decodes without guesses: verification
        // would have to shape every guessed row the same way. An unforked request's one pending token is its
        // prompt's last (a chunked prefill's remainder): its row is where the n samples fork and each draws its own
        // first token, which guesses verified on sample 0 alone would skip (n = 1 is forked from the start).
        const bool speculate = decode_pass && r->forked && options_.speculative.enabled() &&
                               !s.speculation_failed && !shapes_logits(r->request.params);
        int64_t guesses = speculate ? propose(*r, s, budget - 1) : 0;
        // Guesses are an optimisation: dropped rather than preempting anyone to make room for them.
        if (guesses > 0 && !fits(planned, {}, s, 1 + guesses)) {
          guesses = 0;
          s.proposal.tokens.clear();
        }
        n += guesses;
        if (!decode_pass && !fits(planned, {}, s, n)) {
          // A smaller chunk that fits keeps the prompt's progress; preempt only when not even one token fits.
          int64_t lo = 0, hi = n;
          while (hi - lo > 1) {
            const int64_t mid = (lo + hi) / 2;
            (fits(planned, {}, s, mid) ? lo : hi) = mid;
          }
          if (lo > 0 && options_.enable_chunked_prefill) n = lo;
        }
        while (!fits(planned, {}, s, n)) {
          RequestState* victim = nullptr;
          for (auto it = running_.rbegin(); it != running_.rend(); ++it)
            if ((*it)->running) {
              victim = it->get();
              break;
            }
          report.preempted.push_back(victim->id);
          preempt(*victim, planned, budget);
          if (victim == r) break;
        }
        if (!r->running) break;
        planned.push_back({r, &s, n, guesses});
        budget -= n;
      }
    }
  }
}

void Scheduler::admit_waiting(std::vector<Planned>& planned, int64_t& budget, StepReport& report) {
  CacheManager& pool = *cache_;
  int64_t reserved_slots = 0;  // state slots the unforked running requests will take when they fork
  for (const auto& r : running_)
    if (!r->forked) reserved_slots += r->request.params.n - 1;
  while (!waiting_.empty() && budget > 0) {
    RequestState& r = *waiting_.front();
    const int64_t need_seqs = r.sequences();
    if (live_sequences() + need_seqs > seq_cap()) break;
    if (pool.has_state() && pool.stats().free_state_slots - reserved_slots < need_seqs) break;
    std::vector<Planned>& tentative = tentative_;
    tentative.clear();
    int64_t left = budget;
    bool ok = true;
    for (auto& sp : r.samples) {
      Sample& s = *sp;
      if (s.finished) continue;
      try {
        s.seq = cache_->new_sequence();
      } catch (const PoolExhausted&) {
        ok = false;
        break;
      }
      if (pool.options().prefix_caching) pool.attach_cached_prefix(*s.seq, s.tokens);
      const int64_t rem = s.remaining();
      int64_t n = std::min(rem, left);
      if (!options_.enable_chunked_prefill && rem > left) {
        if (!planned.empty() || !tentative.empty()) {
          ok = false;
          break;
        }
        n = rem;
      }
      if (n <= 0) continue;
      if (!fits(planned, tentative, s, n)) {
        ok = false;
        break;
      }
      tentative.push_back({&r, &s, n});
      left -= n;
    }
    if (!ok) {
      for (auto& s : r.samples) s->seq.reset();
      break;
    }
    for (auto& s : r.samples) {
      if (!s->seq) continue;
      counters_.prefix_cache_queries += int64_t(s->tokens.size());
      counters_.prefix_cache_hits += s->seq->cached_tokens();
    }
    if (!r.admitted_before) r.usage.cached_tokens = r.samples[0]->seq->cached_tokens();
    r.admitted_before = true;
    r.running = true;
    if (!r.forked) reserved_slots += r.request.params.n - 1;
    planned.insert(planned.end(), tentative.begin(), tentative.end());
    budget = left;
    report.admitted.push_back(r.id);
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
}

std::vector<Scheduler::Planned> Scheduler::plan(StepReport& report) {
  std::vector<Planned> planned;
  int64_t budget = options_.max_num_batched_tokens;
  schedule_running(planned, budget, report);
  // vLLM: a step that had to preempt admits nobody (the pool is short already).
  if (report.preempted.empty()) admit_waiting(planned, budget, report);
  return planned;
}

StepReport Scheduler::step() {
  StepReport report;
  std::vector<Planned> planned = plan(report);
  if (planned.empty() && running_.empty() && !waiting_.empty()) {
    // Nothing runs and the first waiting request cannot start even in an empty pool.
    std::unique_ptr<RequestState> r = std::move(waiting_.front());
    waiting_.pop_front();
    fail(*r, "the memory pool cannot hold this request's next step even with nothing else running");
    if (before_outputs_) before_outputs_();
    deliver(*r);
    return report;
  }
  for (const auto& p : planned) {
    report.chunks.push_back({p.request->id, p.sample->index, p.num_tokens, p.sample->remaining() == 1 && p.sample->generated > 0});
    report.num_tokens += p.num_tokens;
  }
  if (!planned.empty()) run(planned, report);
  std::vector<std::unique_ptr<RequestState>> retired = retire_finished();
  if (before_outputs_) before_outputs_();
  for (auto& r : running_) deliver(*r);
  for (auto& r : retired) deliver(*r);
  return report;
}

void Scheduler::run(const std::vector<Planned>& planned, StepReport& report) {
  Batch& batch = batch_;
  batch.clear();
  std::vector<int64_t> rows;
  std::vector<int64_t> row_of(planned.size(), -1);
  std::vector<int64_t> length_before(planned.size()), guesses(planned.size(), 0);
  std::vector<int32_t> verify_tokens;
  for (size_t i = 0; i < planned.size(); ++i) {
    const Planned& p = planned[i];
    const int64_t from = p.sample->seq->length();
    length_before[i] = from;
    if (p.guesses > 0 && checkpoint_for_rollback(*p.sample)) {
      // The pending token and the guesses after it, every row's logits wanted.
      guesses[i] = p.guesses;
      verify_tokens.assign(1, p.sample->tokens.back());
      verify_tokens.insert(verify_tokens.end(), p.sample->proposal.tokens.begin(), p.sample->proposal.tokens.end());
      batch.add(*p.sample->seq, verify_tokens);
      row_of[i] = int64_t(rows.size());
      for (int64_t t = batch.num_tokens() - p.num_tokens; t < batch.num_tokens(); ++t) rows.push_back(t);
      continue;
    }
    // Without a checkpoint slot the guesses are dropped: the pending token alone, as a plain decode.
    const int64_t count = p.guesses > 0 ? 1 : p.num_tokens;
    batch.add(*p.sample->seq, std::span<const int32_t>(p.sample->tokens).subspan(size_t(from), size_t(count)));
    if (from + count == int64_t(p.sample->tokens.size())) {
      row_of[i] = int64_t(rows.size());
      rows.push_back(batch.num_tokens() - 1);
    }
  }
  // An empty span would ask for every row: a step of prefill chunks only asks for one and ignores it.
  if (rows.empty()) rows.push_back(0);
  TensorView logits;  // where the model left them: on a GPU they stay there and only the sampled ids come back
  // Prefixes were looked up at admission; the step's blocks are reserved here, as planned, and the model only
  // computes over the tables it is handed.
  batch.reuse_cached_prefix = false;
  step_counts_.resize(size_t(batch.num_sequences()));
  for (int64_t s = 0; s < batch.num_sequences(); ++s) step_counts_[size_t(s)] = batch.seq_len(s);
  try {
    cache_->reserve(batch.sequences, step_counts_);
    logits = model_.forward_logits(batch, rows, logits_);
  } catch (const PoolExhausted&) {
    for (size_t i = 0; i < planned.size(); ++i)
      if (guesses[i] > 0 && planned[i].sample->seq) cache_->clear_checkpoints(*planned[i].sample->seq);
    // Planning checked the pool; reaching here means the pool changed under us. Nothing was written: preempt
    // the newest request and let the next step re-plan.
    if (!running_.empty()) {
      std::vector<Planned> none;
      int64_t budget = 0;
      RequestState& newest = *running_.back();
      report.preempted.push_back(newest.id);
      preempt(newest, none, budget);
    }
    return;
  } catch (const std::exception& e) {
    for (const auto& p : planned) {
      if (!p.request->done()) fail(*p.request, std::string("forward pass failed: ") + e.what());
    }
    return;
  }
  const auto now = EngineClock::now();
  ++counters_.steps;
  std::vector<StepRow>& step_rows = step_rows_;
  step_rows.clear();
  for (size_t i = 0; i < planned.size(); ++i) {
    const Planned& p = planned[i];
    const bool decode = (p.num_tokens == 1 || p.guesses > 0) && p.sample->generated > 0;
    if (!decode) counters_.prompt_tokens += p.num_tokens;
    if (row_of[i] < 0 || p.sample->finished) continue;
    RequestState& r = *p.request;
    if (guesses[i] > 0) {
      step_rows.push_back({&r, p.sample, row_of[i], guesses[i] + 1, length_before[i]});
      continue;
    }
    if (!r.forked) {
      fork_samples(r);
      if (r.done()) continue;  // forking failed
      // The n samples read the prompt's one row, each with its own sampler and context.
      for (auto& s : r.samples)
        if (!s->finished) step_rows.push_back({&r, s.get(), row_of[i]});
    } else {
      step_rows.push_back({&r, p.sample, row_of[i]});
    }
  }
  sample_step(logits, now);
}

}  // namespace attnzoo
