#pragma once
// The serving engine's knobs (vLLM's names) and the counters it reports.
#include <cstdint>
#include <vector>

#include "engine/speculative.h"

namespace attnzoo {

class Model;

struct EngineOptions {
  int64_t max_num_batched_tokens = 2048;  // tokens one step may run: decodes first, prefill chunks fill the rest
  int64_t max_num_seqs = 64;              // sequences (samples) running at once (at most max_num_batched_tokens)
  // Prompt + generated tokens a sample may reach; 0: the model's context (max_position_embeddings, or YaRN's
  // extension of it; unlimited if unset), which it may not exceed.
  int64_t max_model_len = 0;
  // Long prompts are split across steps so running decodes keep their pace. Off: a prompt is prefilled in one
  // step (alone, if it is longer than max_num_batched_tokens).
  bool enable_chunked_prefill = true;
  // End-of-sequence ids; empty: the tokenizer's (Tokenizer::eos_token_ids), if the engine has one. Front ends
  // pass default_eos_ids (engine/stop.h).
  std::vector<int32_t> eos_token_ids;
  // Requests waiting for admission beyond which add_request refuses new ones (EngineBusy); 0: no limit.
  int64_t max_waiting_requests = 0;
  // Speculative decoding per request (vLLM's speculative_config): each decoding sample verifies up to
  // num_speculative_tokens guesses in the step's batch. `draft_model`: the loaded draft for the "draft" method
  // (must outlive the engine; its pool holds one sequence per running sample).
  SpeculativeOptions speculative;
  const Model* draft_model = nullptr;

  void validate() const;  // ArgumentError naming the field
};

struct EngineStats {
  int64_t running_requests = 0, waiting_requests = 0;
  int64_t running_sequences = 0;   // samples holding a sequence in the pool
  int64_t preemptions = 0;         // total, since the engine started
  int64_t num_blocks = 0, free_blocks = 0;
  double kv_cache_usage = 0;       // fraction of blocks in use, in [0, 1] (vLLM's kv_cache_usage_perc)
  int64_t prefix_cache_queries = 0, prefix_cache_hits = 0;  // prompt tokens looked up / found at admission
  int64_t prompt_tokens = 0;       // prompt tokens computed (recomputation after preemption included)
  int64_t generation_tokens = 0;   // tokens sampled
  int64_t finished_requests = 0, aborted_requests = 0, failed_requests = 0;
  int64_t steps = 0;               // forward passes run
  // Speculative decoding, vLLM's spec_decode counters (num_drafts, num_draft_tokens, num_accepted_tokens, and
  // accepted per guess position), with the acceptance rate and mean acceptance length they give.
  SpeculativeStats speculative;
};

}  // namespace attnzoo
