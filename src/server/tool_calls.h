#pragma once
// Tool calls in the Hermes format that Qwen2.5 / Qwen3 / Hermes templates teach their models:
//   <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>
// read back out of generated text into OpenAI's message.tool_calls, with vLLM's `hermes` parser semantics: the
// text before the first <tool_call> is the content, each block whose JSON is an object with a string "name" (and
// an object "arguments") is a call, a final block the model never closed counts too (it may stop at its end of
// turn). Where vLLM gives up on the whole answer when one block is malformed, a block that is not a call here
// stays in the content (so nothing the model wrote is lost) and the other blocks are still calls.
#include <string>
#include <string_view>
#include <vector>

namespace attnzoo::server {

inline constexpr std::string_view kToolCallOpen = "<tool_call>";
inline constexpr std::string_view kToolCallClose = "</tool_call>";

// How a chat answer is read. text: as it is (no tools, or tool_choice "none"); automatic: tool_choice "auto",
// parsed with parse_hermes_tool_calls; forced: a named / "required" tool_choice, where the answer is the JSON
// object of one call (the prompt already ends with <tool_call>\n and the schema mask holds the rest).
enum class ToolMode { text, automatic, forced };

struct ToolCall {
  std::string id;         // "call_" + 24 hex digits, unique within the process
  std::string name;
  std::string arguments;  // the arguments object as JSON text
};

struct ParsedAnswer {
  std::string content;
  std::vector<ToolCall> calls;
};

// One call's JSON object {"name": ..., "arguments": {...}}; false when `json` is not one.
bool parse_tool_call_json(std::string_view json, ToolCall& call);

ParsedAnswer parse_hermes_tool_calls(std::string_view text);

// The answer read as `mode` says; `parallel` false keeps only the first call (parallel_tool_calls: false).
ParsedAnswer read_answer(std::string_view text, ToolMode mode, bool parallel);

std::string new_tool_call_id();

}  // namespace attnzoo::server
