#pragma once
// Log-probabilities of one row of raw logits (before penalties and temperature: what vLLM reports by default).
#include <cstdint>
#include <span>
#include <vector>

#include "engine/request.h"

namespace attnzoo {

// log_softmax(logits)[token], and the `top` largest entries of log_softmax(logits), best first (ties: lower id
// first). Accumulates in double.
struct RowLogprobs {
  float chosen = 0;
  std::vector<TokenLogprob> top;
};
RowLogprobs row_logprobs(std::span<const float> logits, int32_t token, int64_t top);

}  // namespace attnzoo
