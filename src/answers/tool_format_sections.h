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

#include "answers/tool_call_scan.h"
#include "answers/tool_calls.h"

namespace attnzoo::answers {

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

// A section's calls streamed (ToolCallStream), as vLLM's parsers stream them, in the blocks parse_section cuts: a
// DeepSeek call is announced (index, name) once its head is whole and its arguments' '{' has come; a Kimi-K2 call
// (index, name, its own id) once its id functions.NAME:IDX is whole, as vLLM's kimi_k2 announces it: a space or the
// argument marker follows (its last digit could still be followed by another). Then the object's text goes out as it
// is written. A block closed by its end marker (or by the next block, or the section's end) is read as the whole
// answer reads it: a block whose head was broken before it was announced is content and takes no index; one
// announced and then broken (a Kimi id followed by no argument marker or by arguments that are not an object, JSON
// that does not parse) ends the streaming: the calls sent stay sent, as vLLM's do, and the whole answer's reading, at
// the end, has the last word. Each byte is read a bounded number of times: work linear in the answer, not per push.
class SectionCallStream {
 public:
  struct Delta {
    size_t index = 0;
    bool first = false;  // carries the name (and Kimi's id)
    std::string name, id, arguments;
  };
  explicit SectionCallStream(ToolFormat f) : f_(f) {}
  // `text`: the answer so far without a tail that may begin a marker; each call's text extends the last one's.
  std::vector<Delta> feed(std::string_view text);

 private:
  void arguments(std::string_view text, size_t block_end, std::vector<Delta>& out);
  // Kimi-K2's head read on from scan_: the id announced once whole, then the argument marker and the '{' awaited.
  void kimi_head(std::string_view block, std::vector<Delta>& out);

  ToolFormat f_;
  bool in_section_ = false, in_block_ = false, done_ = false;
  size_t pos_ = 0;       // where the section's marker, or the next block, is searched for
  size_t calls_ = 0;     // calls announced
  // The open block: its first byte, where its end markers are searched for next, its head (whole: announced as call
  // calls_ - 1; broken: never a call), and its arguments' object from `args_`, read as it grows and sent as far as
  // `sent_`.
  size_t body_ = 0, searched_ = 0;
  // (named: Kimi's id announced, its arguments' '{' not yet come; scan_ and id_begin_ from the block's start.)
  enum class HeadState { more, named, whole, broken } head_ = HeadState::more;
  size_t scan_ = 0, id_begin_ = std::string_view::npos;
  bool after_marker_ = false;
  size_t args_ = 0, sent_ = 0;
  JsonValueEnd object_;
};

// deepseek_v3 / deepseek_v31 / kimi_k2: the function's name is written outside the JSON, so a forced call names its
// function in the prompt's opening and the schema holds only the arguments.
bool names_call_outside_json(ToolFormat f);
// The text a forced call of `name` starts with: the section's and the call's openings up to the arguments' '{'.
std::string forced_call_opening(ToolFormat f, std::string_view name);
// The forced answer (the arguments object) as the call of `name`; no call when it is not a whole JSON object (the
// answer was cut by max_tokens). Kimi's id is "functions.NAME:0", as its template numbers a turn's first call.
bool forced_section_call(ToolFormat f, std::string_view name, std::string_view arguments, ToolCall& call);

}  // namespace attnzoo::answers
