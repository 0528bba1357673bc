#pragma once
// gpt-oss answers in OpenAI's harmony format: a run of messages, each a header and a body,
//   <|channel|>analysis<|message|>thinking...<|end|>
//   <|start|>assistant<|channel|>final<|message|>the answer<|return|>
//   <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{...}<|call|>
// (the prompt ends with <|start|>assistant, so the first header has no role; `to=` may also come before
// <|channel|>, as gpt-oss's chat template writes it). HarmonyReader reads such text, special tokens kept, into
// OpenAI's fields with the semantics of vLLM's gpt-oss parsers (parse_chat_output, the `openai` tool parser):
//   - a recipient functions.NAME makes the message a tool call (whatever its channel): its body, as written, is the
//     arguments (vLLM streams the body as written; its whole-answer json.dumps re-write is not copied, so that a
//     call's streamed fragments join to the whole answer's arguments byte for byte, as in the other formats);
//   - analysis messages are reasoning_content, final and commentary-without-recipient (preambles) are content,
//     several messages of one field joined by "\n";
//   - a message to another recipient (builtin tools such as browser.search or python, which this server does not
//     run) or written by another role is dropped, as vLLM drops it; its analysis text stays reasoning.
// Where harmony's own parser would give up, nothing the model wrote in plain words is lost: text outside any
// message that holds no harmony marker (a model that never spoke harmony, words between messages) is content.
// A message cut by max_tokens keeps what was read; a cut call is no call, its body comes back as content (as the
// other formats' cut calls do).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "answers/reasoning.h"
#include "answers/tool_calls.h"
#include "answers/tool_stream.h"

namespace attnzoo::tok {
class Tokenizer;
}

namespace attnzoo::answers {

inline constexpr std::string_view kHarmonyChannel = "<|channel|>";
inline constexpr std::string_view kHarmonyMessage = "<|message|>";
inline constexpr std::string_view kHarmonyStart = "<|start|>";
inline constexpr std::string_view kHarmonyConstrain = "<|constrain|>";
// The two that end an assistant turn (gpt-oss lists both as EOS): the end of the answer, and a tool call.
inline constexpr std::string_view kHarmonyReturn = "<|return|>";
inline constexpr std::string_view kHarmonyCall = "<|call|>";
inline constexpr std::string_view kHarmonyEnd = "<|end|>";

// Whether a chat's answers are read as harmony messages (serve and chat alike): the tool-call format is gpt-oss's
// (--tool-call-parser openai, or read off the template) or the reasoning parser is openai_gptoss.
inline bool reads_harmony(ToolFormat format, ReasoningParser parser) {
  return format == ToolFormat::openai || parser == ReasoningParser::openai_gptoss;
}

// The ids of <|return|> and <|call|>, each where the tokenizer has it as one special token: the ids a harmony
// answer stops at (serve and chat), whether or not the checkpoint's generation_config lists them as EOS.
std::vector<int32_t> harmony_end_ids(const tok::Tokenizer& tokenizer);

// The text the prompt is extended with so that the model starts inside a message: a named tool call's header (the
// body then held to the tool's parameters), or the final channel for response_format.
std::string harmony_call_header(std::string_view function_name);
inline constexpr std::string_view kHarmonyFinalHeader = "<|channel|>final<|message|>";

struct HarmonyAnswer {
  bool has_reasoning = false;  // an analysis message was read (reasoning_content is null otherwise)
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> calls;
};

// Fed the answer a piece at a time; each feed returns the reasoning / content that can be sent now, holding back
// the header of a message until its <|message|> and the end of a body while it may begin a marker. A call goes out
// as vLLM streams it: its first delta (index, id, name) when its header is whole, then its body as it comes;
// calls() holds the whole ones. finish() sends the rest. The pieces add up to read_harmony's answer for the same
// text, except a call cut by max_tokens: announced, it cannot be taken back, and its body follows as content.
class HarmonyReader {
 public:
  struct Piece {
    std::string reasoning, content;
    std::vector<ToolCallDelta> calls;
  };
  // `read_calls`: false (no tools, tool_choice "none") reads a call's body as content. `parallel`: false
  // (parallel_tool_calls) keeps the first call only, as the other formats' readers do.
  explicit HarmonyReader(bool read_calls = true, bool parallel = true) : read_calls_(read_calls), parallel_(parallel) {}
  Piece feed(std::string_view text);
  // `stopped`: the answer ended at an end-of-turn token (<|return|>, <|call|>: the open message is whole), not cut
  // by max_tokens.
  Piece finish(bool stopped);
  const std::vector<ToolCall>& calls() const { return calls_; }
  bool has_reasoning() const { return reasoning_messages_ > 0; }

 private:
  enum class Kind { reasoning, content, call, drop };
  void open_message(std::string_view header, Piece& out);
  void close_message(bool whole, Piece& out);
  void body_text(std::string_view text, Piece& out);
  void stray_text(std::string_view text, Piece& out);

  bool read_calls_, parallel_;
  bool in_body_ = false;
  bool has_role_ = false;  // the header being read began with <|start|> (so with a role)
  Kind kind_ = Kind::content;
  std::string held_;       // header text, or the end of a body that may begin a marker
  std::string call_body_;  // a call's arguments, read whole
  std::string call_name_, call_id_;
  bool call_sent_ = false;  // the open call was announced (parallel_ false: the first call only)
  size_t announced_ = 0;
  int reasoning_messages_ = 0, content_messages_ = 0;
  std::vector<ToolCall> calls_;
};

HarmonyAnswer read_harmony(std::string_view text, bool stopped, bool read_calls = true, bool parallel = true);

}  // namespace attnzoo::answers
