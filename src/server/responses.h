#pragma once
// OpenAI's response objects built from the engine's outputs: a whole completion / chat completion, or the
// server-sent-event chunks of a stream (one per sample delta, then an optional usage chunk).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"
#include "engine/stop.h"
#include "answers/harmony.h"
#include "server/openai_request.h"
#include "answers/tool_stream.h"

namespace attnzoo::tok {
class Tokenizer;
}

namespace attnzoo::server {

struct ResponseContext {
  Endpoint endpoint = Endpoint::completions;
  std::string id;  // "cmpl-N" / "chatcmpl-N"
  int64_t created = 0;  // Unix seconds
  std::string model;
  const tok::Tokenizer* tokenizer = nullptr;  // token strings of logprobs
  // chat: read tool calls out of the answers (answers/tool_calls.h)
  answers::ToolMode tool_mode = answers::ToolMode::text;
  bool parallel_tool_calls = true;
  answers::ReasoningParser reasoning = answers::ReasoningParser::none;  // chat: <think> text into reasoning_content
  bool include_reasoning = true;
  answers::ToolFormat tool_format = answers::ToolFormat::hermes;  // chat with tools: how calls are written
  bool harmony = false;        // chat: gpt-oss's harmony messages (answers/harmony.h), read after harmony_prefix
  std::string harmony_prefix;  // the header the prompt ends with (a forced call's, response_format's final)
  std::string tool_forced_name;                 // ApiRequest::tool_forced_name
};

// One choice gathered over all its deltas (the non-streamed response).
struct Choice {
  std::string text;
  std::vector<TokenLogprob> logprobs;
  std::vector<std::vector<TokenLogprob>> top_logprobs;
  std::optional<FinishReason> finish_reason;
};

class Choices {
 public:
  explicit Choices(int64_t n) : choices_(size_t(n)) {}
  void add(const SampleDelta& delta);
  const std::vector<Choice>& all() const { return choices_; }

 private:
  std::vector<Choice> choices_;
};

std::string full_response(const ResponseContext& ctx, const std::vector<Choice>& choices, const Usage& usage,
                          bool logprobs);

// Streaming: the SSE chunk for one delta (`first`: the choice's first chunk, where chat sends the role), and the
// usage chunk that ends a stream with stream_options.include_usage. `text_offset` is the choice's text length
// before this delta (completions' logprobs.text_offset); it is advanced.
class StreamWriter {
 public:
  StreamWriter(const ResponseContext& ctx, int64_t n, bool logprobs, bool include_usage);
  std::string chunk(const SampleDelta& delta);
  std::string usage_chunk(const Usage& usage) const;
  static std::string event(const std::string& json) { return "data: " + json + "\n\n"; }
  static const char* done() { return "data: [DONE]\n\n"; }

 private:
  ResponseContext ctx_;
  bool logprobs_, include_usage_;
  std::vector<bool> started_;
  std::vector<int64_t> text_offset_;
  // per choice, with tools: its content and calls as they come (answers/tool_stream.h)
  std::vector<answers::ToolCallStream> tools_;
  std::vector<answers::ReasoningStream> reasoning_;  // per choice: splits reasoning from content as the text comes
  std::vector<answers::HarmonyReader> harmony_;      // per choice (gpt-oss): channels and calls as the text comes
  // Per choice, a forced call's first delta (its header is the prompt's end), sent with the choice's first chunk.
  std::vector<std::vector<answers::ToolCallDelta>> harmony_opened_;
};

}  // namespace attnzoo::server
