#include "engine/request.h"

#include "core/error.h"
#include "engine/engine_options.h"

namespace attnzoo {

void RequestParams::validate() const {
  sampling.validate();
  require(max_tokens >= 1, "max_tokens", "must be >= 1, got " + std::to_string(max_tokens));
  require(min_tokens >= 0, "min_tokens", "must be >= 0, got " + std::to_string(min_tokens));
  require(min_tokens <= max_tokens, "min_tokens",
          "must be <= max_tokens (" + std::to_string(max_tokens) + "), got " + std::to_string(min_tokens));
  require(n >= 1, "n", "must be >= 1, got " + std::to_string(n));
  require(top_logprobs >= 0, "top_logprobs", "must be >= 0, got " + std::to_string(top_logprobs));
  require(top_logprobs == 0 || logprobs, "top_logprobs", "needs logprobs");
  for (const auto& s : stop) require(!s.empty(), "stop", "stop strings must not be empty");
  for (const auto& [id, bias] : logit_bias) {
    require(id >= 0, "logit_bias", "token ids must be >= 0, got " + std::to_string(id));
    require(bias >= -100.f && bias <= 100.f, "logit_bias",
            "biases must be in [-100, 100], got " + std::to_string(bias) + " for token " + std::to_string(id));
  }
  require((response_format == ResponseFormat::json_schema) == (json_schema != nullptr), "response_format",
          "json_schema needs a compiled schema, and only json_schema takes one");
}

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::abort: return "abort";
    case FinishReason::error: return "error";
  }
  return "?";
}

void EngineOptions::validate() const {
  require(max_num_batched_tokens >= 1, "max_num_batched_tokens",
          "must be >= 1, got " + std::to_string(max_num_batched_tokens));
  require(max_num_seqs >= 1, "max_num_seqs", "must be >= 1, got " + std::to_string(max_num_seqs));
  require(max_model_len >= 0, "max_model_len", "must be >= 0 (0: the model's), got " + std::to_string(max_model_len));
  require(max_waiting_requests >= 0, "max_waiting_requests",
          "must be >= 0 (0: no limit), got " + std::to_string(max_waiting_requests));
  speculative.validate();
  require(speculative.method != SpeculativeMethod::draft || draft_model != nullptr, "draft_model",
          "the 'draft' speculative method needs the loaded draft model");
}

}  // namespace attnzoo
