#pragma once
// Tool calls read back out of generated text into OpenAI's message.tool_calls, in the three formats of vLLM's
// `--tool-call-parser hermes | llama3_json | mistral` (ToolFormat below). Hermes, as Qwen2.5 / Qwen3 / Hermes
// templates teach their models:
//   <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>
// is read with vLLM's `hermes` parser semantics: the
// text before the first <tool_call> is the content, each block whose JSON is an object with a string "name" (and
// an object "arguments") is a call, a final block the model never closed counts too (it may stop at its end of
// turn). As vLLM's, one block that is not a call makes the whole answer content. A call's arguments are the text
// the model wrote (tool_call_scan.h), which is what a stream sends (tool_stream.h).
#include <string>
#include <string_view>
#include <vector>

namespace attnzoo::answers {

inline constexpr std::string_view kToolCallOpen = "<tool_call>";
inline constexpr std::string_view kToolCallClose = "</tool_call>";
inline constexpr std::string_view kPythonTag = "<|python_tag|>";  // Llama 3.x: may open a JSON call
inline constexpr std::string_view kMistralCalls = "[TOOL_CALLS]";

// The call format of a chat template (detect_tool_format) or of serve's --tool-call-parser.
//   hermes:      <tool_call>{"name": ..., "arguments": {...}}</tool_call>, blocks after any content.
//   llama3_json: the whole answer is {"name": ..., "parameters": {...}}, optionally after <|python_tag|>, several
//                calls separated by ';' (vLLM's llama3_json: an answer that does not begin so is content).
//   mistral:     content, then [TOOL_CALLS] and a JSON array of {"name": ..., "arguments": {...}}; ids of 9
//                letters and digits (Mistral's templates refuse others).
//   openai:      gpt-oss's harmony messages, a call being one addressed to=functions.NAME (answers/harmony.h reads
//                the whole answer, channels and calls together).
//   deepseek_v3, deepseek_v31, kimi_k2: content, then a special-token section of calls (answers/tool_format_sections.h).
//   pythonic:    the whole answer is [f(a=1), g()] (answers/tool_format_pythonic.h).
enum class ToolFormat { none, hermes, llama3_json, mistral, openai, deepseek_v3, deepseek_v31, kimi_k2, pythonic };

ToolFormat parse_tool_call_parser(std::string_view name);  // ArgumentError naming --tool-call-parser
const char* tool_format_name(ToolFormat f);
// From the template's source: <|channel|> (gpt-oss's harmony), <tool_call> (Hermes), [TOOL_CALLS] (Mistral),
// <|tool_calls_section_begin|> (Kimi-K2), <｜tool▁sep｜> (DeepSeek: V3 where the arguments sit in a ```json fence,
// else V3.1), "[func_name1(" (the pythonic templates' instruction), <|python_tag|> or "Environment: ipython"
// (Llama 3.1 / 3.2 / 3.3); none when it mentions none of them.
ToolFormat detect_tool_format(std::string_view template_source);
// The text whose appearance starts the calls (held back while streaming, kept when the tokenizer marks it special).
std::string_view tool_call_marker(ToolFormat f);

// How a chat answer is read. text: as it is (no tools, or tool_choice "none"); automatic: tool_choice "auto",
// parsed with the format's parser; forced: a named / "required" tool_choice, where the answer is one call's JSON
// object ("required": or several, in the format's syntax) behind the format's opening the prompt already ends with
// (<tool_call>\n say); the schema mask holds the rest.
enum class ToolMode { text, automatic, forced };

struct ToolCall {
  std::string id;         // "call_" + 24 hex digits (Mistral: 9 letters and digits), unique within the process
  std::string name;
  std::string arguments;  // the arguments object as JSON text
};

struct ParsedAnswer {
  std::string content;
  std::vector<ToolCall> calls;
};

// One call's JSON object {"name": ..., "arguments": {...}} ("parameters" too for llama3_json); false when `json`
// is not one.
bool parse_tool_call_json(std::string_view json, ToolCall& call, ToolFormat format = ToolFormat::hermes);

ParsedAnswer parse_hermes_tool_calls(std::string_view text);
ParsedAnswer parse_llama3_tool_calls(std::string_view text);
ParsedAnswer parse_mistral_tool_calls(std::string_view text);

// The answer read as `mode` says; `parallel` false keeps only the first call (parallel_tool_calls: false). A forced
// answer is read by forced_calls: all its calls whole, or it is content (cut by max_tokens); for the formats that
// write the name outside the JSON (names_call_outside_json) it is the arguments of `forced_name`.
ParsedAnswer read_answer(std::string_view text, ToolMode mode, bool parallel, ToolFormat format = ToolFormat::hermes,
                         std::string_view forced_name = {});

// The opening a forced answer is read behind, where the format's parser needs one in front of the call objects:
// Hermes "<tool_call>\n", Mistral "[TOOL_CALLS][" (forced_calls, and ToolCallStream as it streams); empty for others.
std::string_view forced_json_opening(ToolFormat format);

// A forced answer (the text after ToolRequest::forced_prefix) read by `format`'s parser behind that opening: its
// calls, or content where it is not calls.
ParsedAnswer forced_calls(std::string_view text, ToolFormat format);

// "call_" + 24 hex digits; for mistral 9 letters and digits.
std::string new_tool_call_id(ToolFormat format = ToolFormat::hermes);

}  // namespace attnzoo::answers
