#pragma once
// The call formats written as special-token sections after any content, as vLLM's `--tool-call-parser deepseek_v3 |
// deepseek_v31 | kimi_k2` read them:
//   deepseek_v3:  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜>
//                 ... <｜tool▁calls▁end｜>   (DeepSeek-V3, R1)
//   deepseek_v31: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
//   kimi_k2:      <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{...}
//                 <|tool_call_end|>...<|tool_calls_section_end|>   (the call's id is "functions.NAME:IDX")
// The text before the section is the content. Each call whose arguments are a JSON object is a call; a last call cut
// before its end marker (or the section's) still counts when its JSON is whole. A call block that does not parse,
// and text after the section that is not whitespace, stay in the content (vLLM drops them); when no block is a call
// the whole answer is content.
#include <string>
#include <string_view>
#include <vector>

#include "server/tool_calls.h"

namespace attnzoo::server {

inline constexpr std::string_view kDeepSeekCallsBegin = "<｜tool▁calls▁begin｜>";
inline constexpr std::string_view kDeepSeekCallsEnd = "<｜tool▁calls▁end｜>";
inline constexpr std::string_view kDeepSeekCallBegin = "<｜tool▁call▁begin｜>";
inline constexpr std::string_view kDeepSeekCallEnd = "<｜tool▁call▁end｜>";
inline constexpr std::string_view kDeepSeekSep = "<｜tool▁sep｜>";
inline constexpr std::string_view kKimiSectionBegin = "<|tool_calls_section_begin|>";
inline constexpr std::string_view kKimiSectionEnd = "<|tool_calls_section_end|>";
inline constexpr std::string_view kKimiCallBegin = "<|tool_call_begin|>";
inline constexpr std::string_view kKimiArgumentBegin = "<|tool_call_argument_begin|>";
inline constexpr std::string_view kKimiCallEnd = "<|tool_call_end|>";

ParsedAnswer parse_deepseek_v3_tool_calls(std::string_view text);
ParsedAnswer parse_deepseek_v31_tool_calls(std::string_view text);
ParsedAnswer parse_kimi_k2_tool_calls(std::string_view text);

// A section's calls as far as a streamed answer shows them (ToolCallStream), in the blocks parse_section cuts:
// a call's name (and Kimi's id) once its head is whole and its arguments' '{' has come, then the object's text as
// it is written; a block closed by its end marker (or by the next block, or the section's end) is read as the whole
// answer reads it: a call, or content that takes no index (a block whose head was broken was never announced).
struct SectionCallSoFar {
  std::string name, id, arguments;
};
struct SectionSoFar {
  std::vector<SectionCallSoFar> calls;
  size_t settled = 0;  // calls in closed blocks: no later text changes them
  size_t resume = 0;   // where the next read starts (past those blocks)
};
// `from`: 0 (the section's marker is searched for), or the `resume` of an earlier read of the same text grown.
SectionSoFar section_calls_so_far(ToolFormat f, std::string_view text, size_t from);

// deepseek_v3 / deepseek_v31 / kimi_k2: the function's name is written outside the JSON, so a forced call names its
// function in the prompt's opening and the schema holds only the arguments.
bool names_call_outside_json(ToolFormat f);
// The text a forced call of `name` starts with: the section's and the call's openings up to the arguments' '{'.
std::string forced_call_opening(ToolFormat f, std::string_view name);
// The forced answer (the arguments object) as the call of `name`; no call when it is not a whole JSON object (the
// answer was cut by max_tokens). Kimi's id is "functions.NAME:0", as its template numbers a turn's first call.
bool forced_section_call(ToolFormat f, std::string_view name, std::string_view arguments, ToolCall& call);

}  // namespace attnzoo::server
