#pragma once
// The tool-calling fields of a chat request (tools, tool_choice, parallel_tool_calls) and the OpenAI messages
// that carry calls and their results (assistant messages with tool_calls, role "tool" messages), read into what
// the chat template and the engine need. Errors are ApiErrors (400) naming the field.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "chat/value.h"
#include "engine/json_schema.h"
#include "engine/json_sequence.h"
#include "loader/json.h"
#include "answers/tool_calls.h"

namespace attnzoo {
class ChatFormat;
}

namespace attnzoo::server {

struct ToolRequest {
  answers::ToolMode mode = answers::ToolMode::text;
  // how calls are written (the template's, or --tool-call-parser)
  answers::ToolFormat format = answers::ToolFormat::none;
  bool parallel = true;                       // parallel_tool_calls
  chat::Value tools = chat::Value::none();    // as the template sees them (transformers' tools=)
  // A named or "required" tool_choice: the answer's schema ({"name": const / enum, "arguments": parameters}, Llama
  // 3.x: "parameters") and the text the prompt is extended with so the model starts inside a call.
  std::shared_ptr<const JsonSchema> schema;
  std::string forced_prefix;
  // The forced function where the format names it outside the JSON (DeepSeek, Kimi): the prompt's opening names it
  // and the schema holds only its arguments.
  std::string forced_name;
  // "required" with parallel_tool_calls: one or more calls, each a document of `schema`, in the format's own
  // syntax between them (required_call_sequence); null: one call.
  std::shared_ptr<const JsonSequence> sequence;
};

// At most kMaxTools tools (OpenAI's limit). Each tool's parameters are compiled when read, and the schemas' DFA
// states and length tables count against one budget for the whole request, that of one schema (engine/json_schema.h,
// SchemaBudget): what makes a compile costly, so a list of tools costs about what one response_format schema may,
// not kMaxTools times that.
inline constexpr size_t kMaxTools = 128;

// `format`: the call format the model writes (none: tools are refused naming `tools`); `template_source` decides
// the spelling of a forced Mistral opening ("[TOOL_CALLS] [" in v0.3's template, "[TOOL_CALLS][" in Nemo's).
ToolRequest parse_tool_fields(const json::Value& body, bool chat_endpoint, answers::ToolFormat format,
                              std::string_view template_source = {});

// What goes between the calls of a "required" answer, and after the last, in `format`'s syntax after its forced
// opening: Hermes "\n</tool_call>\n<tool_call>\n" (end "\n</tool_call>"), Mistral ", " (end "]"), Llama 3.x "; ".
JsonSequence required_call_sequence(answers::ToolFormat format);

// serve --tool-call-parser: ArgumentError naming the flag and `model_dir` when there is no chat template or it does
// not render a tools list (a probe tool's name must appear in a rendered prompt).
void check_tool_call_parser(answers::ToolFormat format, const ChatFormat* chat, const std::string& model_dir);

// OpenAI's messages as the template's list: content parts joined, assistant tool_calls kept with their
// "arguments" JSON text parsed into an object (as vLLM does, so templates write it with tojson), other keys as sent.
// `format` DeepSeek's: their templates join the arguments to strings with '+', so they stay the JSON text as sent
// (checked to be an object all the same). `harmony` (gpt-oss's template): an assistant's reasoning_content /
// reasoning becomes its "thinking", and content null beside tool_calls is left out. `max_values`: the most JSON
// values one call's arguments text may hold (the body's own limit, openai_request.h's body_value_limit).
chat::Value chat_messages(const json::Value& messages, answers::ToolFormat format = answers::ToolFormat::none,
                          bool harmony = false, int64_t max_values = json::ParseOptions{}.max_values);

}  // namespace attnzoo::server
