#pragma once
// The generation loop: prefill the prompt, then decode one token at a time from the cache, sampling each step
// and streaming the new text. It knows the model and the tokenizer only through two small interfaces, so any
// model (or a test double) can drive it; a batch scheduler will later replace this loop, not these seams.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sampler.h"
#include "engine/speculative.h"

namespace attnzoo {

// One sequence of a model, with its cache: each call appends tokens and returns the logits after the last one.
class LogitsSource {
 public:
  virtual ~LogitsSource() = default;
  virtual int64_t vocab_size() const = 0;
  // Appends `tokens` (the prompt, or one sampled token) to the sequence and writes the next-token logits that
  // follow the last of them into `logits` (vocab_size() entries).
  virtual void append(std::span<const int32_t> tokens, std::span<float> logits) = 0;
  // How many positions the model can hold (its context: max_position_embeddings, or as YaRN extends it); 0: no limit.
  virtual int64_t max_positions() const { return 0; }

  // Speculative decoding needs three more operations; a source without them never speculates.
  virtual bool can_speculate() const { return false; }
  // Appends `tokens` and writes the logits after each of them: tokens.size() rows of vocab_size().
  virtual void append_all(std::span<const int32_t> tokens, std::span<float> logits);
  // Forgets earlier rollback points and makes the current length one (cheap: a state copy at most).
  virtual void checkpoint() {}
  // Back to `length` tokens (at or after the last checkpoint), as if the later ones had never been appended.
  virtual void rollback(int64_t length);
  // Keeps what a rollback of up to `tokens` tokens needs (a sliding window's blocks); before the sequence grows.
  virtual void keep_rollback_room(int64_t) {}
};

// Token ids to text, piece by piece: push returns only whole UTF-8 characters, holding partial ones back.
class TextStream {
 public:
  virtual ~TextStream() = default;
  virtual std::string push(int32_t token) = 0;
  virtual std::string flush() = 0;  // whatever is still held when generation ends
};

struct GenerationOptions {
  SamplingParams sampling;
  int64_t max_new_tokens = 128;
  // transformers' min_new_tokens: until this many new tokens exist the EOS ids get -inf logits (speculative
  // verification included), and no stop string ends in those tokens' text (vLLM's min_tokens). max_new_tokens and
  // the model's positions still end generation first, as transformers lets them.
  int64_t min_new_tokens = 0;
  std::vector<int32_t> eos_token_ids;  // front ends pass default_eos_ids (engine/stop.h)
  std::vector<std::string> stop;       // stop strings: need a TextStream
  // Polled before each decode step: true ends generation with StopReason::cancelled (an interrupt: Ctrl-C in
  // the CLI, KeyboardInterrupt in Python).
  std::function<bool()> cancel;
  // Speculative decoding: when set (and the LogitsSource can speculate), each step verifies up to
  // num_speculative_tokens guesses from `proposer` in one forward pass; the output distribution is unchanged.
  Proposer* proposer = nullptr;
  int64_t num_speculative_tokens = 0;
};

// max_positions: prompt + new tokens reached the model's max_position_embeddings (the announced truncation of
// every front end: generation stops there, whatever max_new_tokens asked for).
enum class StopReason { max_new_tokens, eos, stop_string, max_positions, cancelled };
const char* stop_reason_name(StopReason r);

struct GenerationResult {
  std::vector<int32_t> tokens;  // the new tokens; an EOS that ended generation is included (as transformers does)
  std::string text;             // everything streamed: no EOS text, stop string and anything after it trimmed
  StopReason reason = StopReason::max_new_tokens;
  int64_t prompt_tokens = 0;
  double prefill_seconds = 0;  // the prompt's forward pass
  double decode_seconds = 0;   // the forward passes of the tokens after the first
  int64_t decode_steps = 0;    // how many of those passes ran
  SpeculativeStats speculative;
};

using TextCallback = std::function<void(std::string_view)>;

// Throws ArgumentError for an empty prompt ("prompt"), a prompt longer than model.max_positions() ("prompt"),
// max_new_tokens < 0, min_new_tokens < 0, or stop strings without `text`.
GenerationResult generate(LogitsSource& model, std::span<const int32_t> prompt, const GenerationOptions& options,
                          TextStream* text = nullptr, const TextCallback& on_text = {});

}  // namespace attnzoo
