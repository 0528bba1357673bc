#pragma once
// The body of POST /v1/completions and /v1/chat/completions read into what the engine needs. Every field is
// checked here, naming it in the ApiError; the engine's own checks (context length, pool size) come later.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/request.h"
#include "loader/json.h"
#include "answers/reasoning.h"
#include "answers/tool_calls.h"

namespace attnzoo {
class ChatFormat;
namespace tok {
class Tokenizer;
}
}  // namespace attnzoo

namespace attnzoo::server {

struct ApiLimits {
  int64_t max_n = 16;            // samples per request
  int64_t max_top_logprobs = 20;  // alternatives per token (OpenAI allows 20)
  int64_t max_model_len = 0;     // the engine's; the default max_tokens of a chat request fills it
  int64_t max_logit_bias = 1024;  // logit_bias entries per request
  // Every stop string is looked for in every sample's text after each token, on the engine's thread: a few short
  // ones (OpenAI allows 4) are what clients send.
  int64_t max_stop = 16;              // stop strings per request
  int64_t max_stop_bytes = 256;       // bytes per stop string
  int64_t max_stop_token_ids = 256;   // stop_token_ids entries per request
  // JSON values one body may hold beyond max_model_len (a prompt of token ids takes one per token): messages, tools,
  // logit_bias, a schema. Each costs about 128 bytes parsed, where `0,` took 2 bytes of the body.
  int64_t max_body_values_beyond_context = 1 << 16;
  // --reasoning-parser: chat answers' <think> text goes to reasoning_content (answers/reasoning.h).
  answers::ReasoningParser reasoning_parser = answers::ReasoningParser::none;
  // --tool-call-parser: the call format, over the one detected from the chat template (none: detected).
  answers::ToolFormat tool_call_parser = answers::ToolFormat::none;
};

enum class Endpoint { completions, chat_completions };

struct ApiRequest {
  Endpoint endpoint = Endpoint::completions;
  std::string model;  // as the client named it ("" when absent)
  Request request;    // prompt ids and engine parameters
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with the usage
  answers::ToolMode tool_mode = answers::ToolMode::text;  // how the answers are read (tools / tool_choice)
  answers::ToolFormat tool_format = answers::ToolFormat::hermes;
  std::string tool_forced_name;  // a forced call whose name the format writes outside the JSON (DeepSeek, Kimi)
  bool parallel_tool_calls = true;
  // The server's parser, or none where the answer is held to a schema from its first token (a forced tool call,
  // response_format), so it has no <think> block.
  answers::ReasoningParser reasoning = answers::ReasoningParser::none;
  bool include_reasoning = true;  // vLLM's include_reasoning: false leaves reasoning_content out
  // gpt-oss (a harmony template, --tool-call-parser openai or --reasoning-parser openai_gptoss): the answer is read
  // as harmony messages (answers/harmony.h), after `harmony_prefix`, the header the prompt was extended with (a
  // forced call's, or the final channel's for response_format).
  bool harmony = false;
  std::string harmony_prefix;
};

// The most JSON values one body may hold: max_model_len + max_body_values_beyond_context (2^20 + that when
// max_model_len is unknown, 0). A larger document is a 400 as it is parsed, before the values past it are built.
int64_t body_value_limit(const ApiLimits& limits);

// A body's parsed tree (about 128 bytes a value, at most body_value_limit) lives while the request is read from it,
// on the connection's thread. A small body (kSmallBody: 16k values at most, a few MiB parsed) goes at once; a larger
// one takes one of kLargeBodySlots first, waiting for one to be free, so that connections sending --max-body-bytes
// of `0,0,...` at once hold a few such trees, not one each. parse_request takes one itself.
class BodySlot {
 public:
  static constexpr size_t kSmallBody = 32 << 10;
  static constexpr int kLargeBodySlots = 4;
  explicit BodySlot(size_t body_bytes);
  ~BodySlot();
  BodySlot(const BodySlot&) = delete;
  BodySlot& operator=(const BodySlot&) = delete;

 private:
  bool held_ = false;
};

// Throws ApiError (400, naming the field) for malformed JSON, wrong types, values out of range; chat requests
// need `chat` (a 400 says the model has no chat template otherwise).
ApiRequest parse_request(Endpoint endpoint, const std::string& body, const tok::Tokenizer& tokenizer,
                         const ChatFormat* chat, const ApiLimits& limits);

}  // namespace attnzoo::server
