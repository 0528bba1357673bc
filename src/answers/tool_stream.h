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
// answer cut inside a call, a DeepSeek / Kimi block announced and then broken), a stream cannot take them back:
// they stay sent, as far as they went, and the content follows. A client joins deltas by index, so a sent call is
// only continued by the whole answer's call that is the same call (its name, Kimi's own id, arguments that extend
// the sent text): the whole answer's calls after one that went stale go out whole at new indices, after every
// index used. What a client assembles is then the whole answer's calls, in order, among the stale ones (never one
// call's name with another's arguments), and the finish_reason is the whole answer's (called()).
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "answers/tool_call_scan.h"
#include "answers/tool_calls.h"
#include "answers/tool_format_pythonic.h"
#include "answers/tool_format_sections.h"

namespace attnzoo::answers {

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
  // Whether the choice calls tools ("tool_calls" for a finished answer): once finished, whether the whole answer's
  // reading has calls, as the whole response reports it, stale calls sent before or not; until then, whether a
  // call went out.
  bool called() const { return finished_ ? whole_called_ : !sent_.empty(); }

 private:
  struct Partial {
    std::string name;       // empty until whole
    std::string arguments;  // the text that may be sent
    std::string id;         // the model's own id (Kimi-K2's functions.NAME:IDX); empty: one is made
  };
  std::string_view definite() const;
  // Hermes, Llama 3.x and Mistral (pythonic: pythonic_) read each byte a bounded number of times: the text
  // (answer_'s definite text, or Mistral's joined segments) is read on from where the last push stopped, the open
  // call's object through `call_`, and each call's reading as it grows goes to `offer`.
  void read_hermes(std::string_view text, ToolStreamStep& out);
  void read_llama3(std::string_view text, ToolStreamStep& out);
  void read_mistral(std::string_view text, ToolStreamStep& out);
  void read_mistral_args(ToolStreamStep& out);
  // Call objects one after another, `separator` between them (0: one object only).
  void read_objects(std::string_view text, char separator, ToolStreamStep& out);
  // Call `index` read so far: announced once its name is whole (after every call before it), then what its
  // arguments have beyond what was sent (a call's reading only grows: its object's text as written, or a value's
  // reading once whole).
  void offer(size_t index, std::string_view name, std::string_view arguments, ToolStreamStep& out);
  // finish: the whole answer's calls, each completed where it was sent (the same call) or announced whole at the
  // next new index.
  void send(const std::vector<Partial>& calls, ToolStreamStep& out);

  ToolFormat format_;
  ToolMode mode_;
  bool parallel_;
  std::string forced_name_;
  std::string opening_;  // forced: the opening the prompt ended with, in front of answer_
  std::string answer_;   // the opening and the text so far
  size_t content_sent_ = 0;
  size_t lead_ = 0;  // Llama 3.x, pythonic: the answer's leading whitespace, read once
  bool python_tag_ = false;  // Llama 3.x: its <|python_tag|> read
  // Per index, the call a client has assembled: what finish may continue it with must be the same call.
  struct Sent {
    std::string id, name, arguments;
  };
  std::vector<Sent> sent_;
  bool finished_ = false, whole_called_ = false;
  size_t settled_ = 0;  // calls no later text can change (all sent by the push that settled them)
  static constexpr size_t npos = std::string_view::npos;
  // lead: before the first call (Hermes: the open block's body before its '{'); next: a call object may begin at
  // pos_; object: the call at object_ is open; after: it closed, its separator is awaited; stopped: no more calls
  // stream (the whole answer's reading, at finish, has the last word).
  enum class Phase { lead, next, object, after, stopped };
  Phase phase_ = Phase::lead;
  size_t pos_ = 0, object_ = 0;
  CallObjectScanner call_;
  size_t body_ = npos, close_search_ = 0;  // Hermes: the open block's body (npos: none), its closing tag's search
  // Mistral: the text after each [TOOL_CALLS] from the first (mistral_first_) on, joined as mistral_segments joins
  // it, as far as answer_'s definite text has been read (joined_upto_); where each segment begins in it.
  size_t mistral_first_ = npos, joined_upto_ = 0;
  std::string joined_;
  std::vector<size_t> segments_;
  bool mistral_json_ = false, array_ = false;
  // Mistral's name[ARGS]value segments: how many are read whole (a later [TOOL_CALLS] ended them); the last one's
  // [ARGS] search, name, value start and end.
  size_t args_read_ = 0, args_search_ = 0, value_ = npos;
  std::string args_name_, args_whole_;
  bool args_whole_read_ = false;
  JsonValueEnd args_value_;
  SectionCallStream sections_;
  PythonicCallStream pythonic_;  // DeepSeek-V3 / V3.1, Kimi-K2: read once, as the answer grows
};

}  // namespace attnzoo::answers
