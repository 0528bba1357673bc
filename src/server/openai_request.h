#pragma once
// The body of POST /v1/completions and /v1/chat/completions read into what the engine needs. Every field is
// checked here, naming it in the ApiError; the engine's own checks (context length, pool size) come later.
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

// Throws ApiError (400, naming the field) for malformed JSON, wrong types, values out of range; chat requests
// need `chat` (a 400 says the model has no chat template otherwise).
ApiRequest parse_request(Endpoint endpoint, const std::string& body, const tok::Tokenizer& tokenizer,
                         const ChatFormat* chat, const ApiLimits& limits);

}  // namespace attnzoo::server
