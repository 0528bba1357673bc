#pragma once
// Next-token sampling from one row of logits, with Hugging Face's semantics and order:
//   repetition penalty -> presence / frequency penalties -> temperature -> top-k -> top-p -> min-p -> draw.
// As in vLLM, whose server attnzoo's follows, the repetition penalty counts the prompt and the output, presence and
// frequency the output only: one rule for every front end.
// temperature == 0 is greedy: the argmax of the penalised logits (ties: lowest id, as torch.argmax).
// Draws are keyed, not streamed: the uniform that decides a sample's i-th token is a fixed function of (seed, i),
// so a seed gives the same tokens on every machine, in every batch and however a step's work is split, speculative
// decoding included (engine/speculative.h keeps the token each position's draw picks).
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/aligned_buffer.h"

namespace attnzoo {

struct SamplingParams {
  float temperature = 1.f;         // 0: greedy
  int64_t top_k = 0;               // keep the k largest logits (ties with the k-th kept, as HF); 0: off
  float top_p = 1.f;               // keep the smallest prefix of the sorted distribution with mass >= top_p; 1: off
  float min_p = 0.f;               // drop tokens with probability < min_p * the largest probability; 0: off
  float repetition_penalty = 1.f;  // HF/CTRL: a seen token's logit l becomes l > 0 ? l / r : l * r; 1: off
  float presence_penalty = 0.f;    // OpenAI: l -= presence if the token was generated (count > 0)
  float frequency_penalty = 0.f;   // OpenAI: l -= frequency * count of it among the generated tokens
  uint64_t seed = 0;

  // Throws ArgumentError naming the field (e.g. "top_p: must be in (0, 1], got 0").
  void validate() const;
  bool greedy() const { return temperature == 0.f; }
};

// What a keyed draw is for: each purpose has its own uniform at a position, so one never shifts another.
enum class DrawPurpose : uint64_t { token = 0, accept = 1, residual = 2, guess = 3 };

// The uniform in [0, 1) (53 random bits) for `purpose` at token index `index` of the stream `seed`: splitmix64's
// output function over a counter made from the three. Fully specified, so portable; pinned by a test.
double keyed_uniform(uint64_t seed, uint64_t index, DrawPurpose purpose);

// Applies the three penalties in place to one row. `context` holds the tokens seen so far, its first
// `prompt_length` the prompt's (the repetition penalty's alone), the rest generated; every id must lie in
// [0, vocab) (ArgumentError naming "context_ids" otherwise). A context shorter than the prompt is all prompt.
void apply_penalties(float* logits, int64_t vocab, std::span<const int32_t> context, int64_t prompt_length,
                     const SamplingParams& p);

// A seed for a request that named none: 64 bits from std::random_device, so each such request draws afresh (as
// vLLM / OpenAI do) while its samples still follow the keyed draws from that seed.
uint64_t fresh_seed();

class Sampler {
 public:
  // Validates. The first `prompt_length` tokens of every context given to it are the prompt's: they count for the
  // repetition penalty only (apply_penalties).
  explicit Sampler(const SamplingParams& params, int64_t prompt_length = 0);

  // One token from one row of logits (not modified). Throws ArgumentError("logits", ...) for an empty row,
  // NaN or +inf entries, or a row that is all -inf.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> context = {});

  // The distribution sample() draws from, over the whole vocabulary (`probs` gets logits.size() entries): the same
  // penalties, temperature and filters, so speculative decoding's accept / reject rule sees exactly the
  // sampler's distribution. Greedy gives a one-hot row at the token sample() returns. Same errors as sample().
  void probabilities(std::span<const float> logits, std::span<const int32_t> context, std::vector<float>& probs);

  const SamplingParams& params() const { return params_; }
  int64_t prompt_length() const { return prompt_length_; }
  // The index of the next token this sampler decides: each sample() call (greedy too) decides one and moves on.
  // The engine seeks where a sample's tokens are counted from elsewhere (a speculative rollback).
  int64_t position() const { return position_; }
  void seek(int64_t position);
  // The keyed uniform for `purpose` at the current position (nothing moves).
  double uniform(DrawPurpose purpose) const { return keyed_uniform(params_.seed, uint64_t(position_), purpose); }
  // The token draw at the current position, moving on: what sample() uses, for samplers that run elsewhere (GPU).
  double take_token_draw();

 private:
  // Penalties, the row checks and temperature into work_; returns the greedy token, else -1 with the row's max.
  int32_t prepare_row(std::span<const float> logits, std::span<const int32_t> context, float& max);
  // The filters on the prepared row: how many candidates_ are kept, or nothing when every token is.
  std::optional<size_t> filter(int64_t vocab, float max);
  size_t filter_sorted(int64_t vocab, float max);
  int32_t sample_full(int64_t vocab, float max, double uniform);
  int32_t draw_from_candidates(size_t count, float max, double uniform);

  SamplingParams params_;
  int64_t prompt_length_ = 0;
  int64_t position_ = 0;
  AlignedBuffer<float> work_, exp_;
  AlignedBuffer<int32_t> candidates_;
  std::vector<double> block_sums_;
  std::vector<float> values_;
  std::vector<int32_t> sorted_context_;
};

}  // namespace attnzoo
