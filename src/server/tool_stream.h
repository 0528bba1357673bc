#pragma once
// Tool calls streamed as vLLM streams them: per choice, a call's first delta as soon as its name is whole
// ({"index", "id", "type": "function", "function": {"name", "arguments": <what is written so far>}}), then
// {"index", "function": {"arguments": <new text>}} as its arguments grow. The arguments go out as the model writes
// them (the value's own bytes, read by tool_call_scan.h), so call i's fragments concatenate to the `arguments`
// the whole answer reports for call i. Held back: a tail that may be the start of a marker (</tool_call>,
// [TOOL_CALLS], the DeepSeek / Kimi section markers) and a string-valued "arguments" until it closes (its contents,
// not its text, are the arguments). DeepSeek-V3 / V3.1 and Kimi-K2 name the function in a head before the
// arguments object (tool_format_sections.h: SectionCallStream); pythonic arguments go out one keyword at a time,
// as JSON (tool_format_pythonic.h).
//
// The content before the calls streams as it comes (ToolCallStream::push); the answer is read whole when the
// choice ends (finish): whatever that reading has beyond what was sent goes out then (content after the calls,
// the rest of every call). Where that reading turns calls already sent into content (a later block malformed, an
// answer cut inside a call), a stream cannot take them back: they stay sent, and the content follows.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "server/tool_calls.h"
#include "server/tool_format_sections.h"

namespace attnzoo::server {

struct ToolCallDelta {
  size_t index = 0;
  bool first = false;  // carries id, type and name
  std::string id, name, arguments;
};

struct ToolStreamStep {
  std::string content;
  std::vector<ToolCallDelta> calls;
};

class ToolCallStream {
 public:
  // mode automatic or forced (a forced answer is read behind the format's opening: forced_calls; `forced_name`:
  // the function a format that names it outside the JSON was forced to, ToolRequest::forced_name).
  ToolCallStream(ToolFormat format, ToolMode mode, bool parallel, std::string forced_name = {});

  ToolStreamStep push(std::string_view text);
  // The choice's end: the answer read whole (read_answer), its remainder sent.
  ToolStreamStep finish();
  bool called() const { return !sent_.empty(); }

 private:
  struct Partial {
    std::string name;       // empty until whole
    std::string arguments;  // the text that may be sent
    std::string id;         // the model's own id (Kimi-K2's functions.NAME:IDX); empty: one is made
  };
  // Calls read from `text` on, `from` past the ones already settled: `settled` of them are whole and followed by
  // what begins the next (a closing tag, ';', ','), so no later text changes them; the next read resumes at
  // `resume`. Each push then reads only the calls still open, not the whole answer again.
  struct Read {
    std::vector<Partial> calls;
    size_t settled = 0, resume = 0;
  };
  // The calls read so far in answer_'s definite text (a tail that may begin a marker left out), from call `base` on
  // (the settled ones before it were sent whole when they settled).
  std::vector<Partial> partial_calls(size_t& base);
  Read hermes_calls(std::string_view text, size_t from) const;
  Read llama3_calls(std::string_view text, size_t from) const;
  Read mistral_calls(std::string_view text, size_t from) const;
  Read pythonic_calls(std::string_view text, size_t from) const;
  std::string_view definite() const;
  void send(const std::vector<Partial>& calls, size_t base, ToolStreamStep& out);

  ToolFormat format_;
  ToolMode mode_;
  bool parallel_;
  std::string forced_name_;
  std::string opening_;  // forced: the opening the prompt ended with, in front of answer_
  std::string answer_;   // the opening and the text so far
  size_t content_sent_ = 0;
  struct Sent {
    std::string id, arguments;
  };
  std::vector<Sent> sent_;
  size_t settled_ = 0;  // calls no later text can change (all sent by the push that settled them)
  size_t resume_ = 0;   // where reading continues after them
  SectionCallStream sections_;  // DeepSeek-V3 / V3.1, Kimi-K2: read once, as the answer grows
};

}  // namespace attnzoo::server
