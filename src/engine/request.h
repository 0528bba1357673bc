#pragma once
// What a client asks the serving engine for (a Request: prompt ids and RequestParams) and what comes back while
// it runs (RequestOutput, streamed step by step). The names follow vLLM / OpenAI: max_tokens, min_tokens, n, stop,
// stop_token_ids, ignore_eos, logprobs / top_logprobs, finish_reason "stop" / "length" / "abort".
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/sampler.h"

namespace attnzoo {

using EngineClock = std::chrono::steady_clock;

struct JsonSchema;
struct JsonSequence;

// What the generated text must be. json_object: JSON mode (OpenAI's response_format), each sample's text is kept a
// prefix of one JSON object (engine/json_constraint.h) and the sample ends, "stop", as that object closes.
// json_schema: structured outputs, the same for a document valid against RequestParams::json_schema
// (engine/json_schema.h); EOS / stop ids are allowed only where the text is a whole document.
enum class ResponseFormat { text, json_object, json_schema };

struct RequestParams {
  // Temperature, top-k / top-p / min-p, the three penalties and the seed. Sample i of n draws from its own
  // generator seeded with sampling.seed + i, so a seeded request gives the same tokens however it is batched.
  SamplingParams sampling;
  int64_t max_tokens = 16;               // new tokens per sample (the model's context may end it sooner: "length")
  int64_t n = 1;                         // samples; they share the prompt's blocks (forked after its prefill)
  std::vector<std::string> stop;         // stop strings (need the engine's tokenizer); the text ends before one
  std::vector<int32_t> stop_token_ids;   // end a sample like EOS (the id counts as generated, its text is not shown)
  bool ignore_eos = false;               // keep going past the model's EOS ids (stop_token_ids still stop)
  // vLLM's min_tokens: until a sample has this many new tokens, its EOS ids (ignore_eos or not, as vLLM) and
  // stop_token_ids get -inf logits before sampling, verification included, and no stop string ends in the text of
  // those tokens (one may begin there). Logprobs stay the raw logits', as vLLM v1 reports them. A JSON / schema
  // document that closes earlier still ends the sample, and max_model_len may end it sooner ("length").
  int64_t min_tokens = 0;
  bool logprobs = false;                 // report the chosen token's log-probability
  int64_t top_logprobs = 0;              // and this many most likely alternatives (needs logprobs)
  // OpenAI's logit_bias: (token id, bias in [-100, 100]) added to the raw logits before the penalties and the
  // sampler (a bias of -100 all but bans a token, +100 all but forces it). Logprobs stay the raw logits'.
  std::vector<std::pair<int32_t, float>> logit_bias;
  // Leave special tokens out of the text (vLLM's skip_special_tokens). Tool calling turns it off where the model's
  // <tool_call> tag is a special token, or the parser would never see the tag.
  bool skip_special_tokens = true;
  ResponseFormat response_format = ResponseFormat::text;
  std::shared_ptr<const JsonSchema> json_schema;  // compiled (compile_json_schema); set iff json_schema
  // With json_schema: several documents in a row with text between them (engine/json_sequence.h; a "required"
  // tool_choice's calls); null: one document.
  std::shared_ptr<const JsonSequence> json_sequence;

  // ArgumentError naming the field: max_tokens < 1, min_tokens < 0 or > max_tokens, n < 1, top_logprobs < 0 or
  // without logprobs, empty stop strings, logit_bias ids < 0 or biases outside [-100, 100], and whatever
  // SamplingParams::validate rejects.
  void validate() const;
};

// True when the scheduler must change a sample's row before sampling it (logit_bias, JSON mode).
inline bool shapes_logits(const RequestParams& p) {
  return !p.logit_bias.empty() || p.response_format != ResponseFormat::text;
}

struct Request {
  std::vector<int32_t> prompt;  // token ids (a chat template, if any, is already applied)
  RequestParams params;
};

enum class FinishReason { stop, length, abort, error };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "abort", "error"

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;  // log-softmax of the model's raw logits (before penalties and temperature), as vLLM reports
};

// What one sample (index in [0, n)) produced since the previous output of its request.
struct SampleDelta {
  int64_t index = 0;
  std::vector<int32_t> token_ids;       // new tokens (an EOS / stop token that ended the sample is included)
  std::vector<EngineClock::time_point> token_times;  // when each new token was sampled (for inter-token latency)
  std::string text;                     // new text: whole UTF-8 characters; text that may begin a stop string is
                                        // held back until the next token settles it; special tokens left out
  std::vector<TokenLogprob> logprobs;   // one per new token when params.logprobs
  std::vector<std::vector<TokenLogprob>> top_logprobs;  // per new token, the top_logprobs most likely, best first
  std::optional<FinishReason> finish_reason;            // set once, on the sample's last delta
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;  // over all samples
  int64_t cached_tokens = 0;      // prompt tokens the prefix cache supplied (first prefill)
};

// One call of the request's callback: what some of its samples produced in one engine step.
struct RequestOutput {
  uint64_t request_id = 0;
  std::vector<SampleDelta> samples;  // only samples with news
  bool finished = false;             // every sample has finished; this is the request's last output
  std::string error;                 // finish_reason error: why (the request's sequences were dropped)
  Usage usage;                       // running totals
  EngineClock::time_point arrival;   // add_request was called
  std::optional<EngineClock::time_point> first_token;  // the first token of any sample was sampled
  std::optional<EngineClock::time_point> finish;       // set on the last output
  int64_t preemptions = 0;           // how often the request was preempted (and recomputed) so far
};

// Called on the engine thread after each step that produced something for the request, in order, and once more
// with finished = true. It must not block (hand the output to a queue: see OutputQueue).
using OutputCallback = std::function<void(RequestOutput&&)>;

}  // namespace attnzoo
