#pragma once
// A call object's JSON text read as far as it goes: {"name": "f", "arguments": {...}} cut anywhere. Streaming
// sends a call's name once its string is whole and then its arguments' text as the model writes it (the bytes of
// the "arguments" value, never rewritten), so the streamed fragments of a call concatenate to exactly the
// `arguments` the whole answer reports; both come from this one scanner.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "answers/tool_calls.h"

namespace attnzoo::answers {

struct CallScan {
  static constexpr size_t npos = std::string_view::npos;
  bool broken = false;  // the text cannot be the start of a JSON object
  bool closed = false;  // the object's '}' read
  size_t end = 0;       // one past that '}'
  bool has_name = false;
  std::string name;     // the "name" string, unescaped, once whole
  // The arguments value ("arguments"; for llama3_json "parameters" too, whichever comes first): where it begins
  // (its first byte), and one past its end once whole (npos before). `args_begin` npos: not begun or absent.
  size_t args_begin = npos, args_end = npos;
};

// The first position at or after `i` that is not JSON whitespace (s.size() when there is none).
size_t skip_json_space(std::string_view s, size_t i);

// `text` begins at the object's '{'.
CallScan scan_call_object(std::string_view text, ToolFormat format);

// One past the JSON value that begins at text[at] (an object, array, string or scalar); npos while it may still go
// on (a scalar runs to the next ',', '}', ']' or whitespace).
size_t json_value_end(std::string_view text, size_t at);

// json_value_end read as the text grows: the value begins at the first byte of the text `advance` is given, and each
// call's text extends the last one's; each byte is read once (the stream's open call, not the whole call per push).
class JsonValueEnd {
 public:
  static constexpr size_t npos = std::string_view::npos;
  // One past the value in `text` (npos while it may still go on), as json_value_end(text, 0) reads it.
  size_t advance(std::string_view text);
  void reset() { *this = JsonValueEnd(); }

 private:
  size_t i_ = 0, end_ = npos;
  int depth_ = 0;
  bool in_string_ = false, escape_ = false;
};

// scan_call_object read as the object's text grows (ToolCallStream's open call): `advance` takes the text from the
// '{' so far, each call's extending the last one's, and reads only what it has beyond the last; scan() is then
// what scan_call_object reads in that text. The arguments' whole-value reading (call_arguments) is kept once made.
class CallObjectScanner {
 public:
  explicit CallObjectScanner(ToolFormat format = ToolFormat::hermes) : format_(format) {}
  void advance(std::string_view object);
  const CallScan& scan() const { return scan_; }
  // read_partial's reading of the text last given: the name once whole (empty before), and the arguments' text that
  // may be sent (an object's text as written so far, any other value only once whole).
  std::string_view name() const { return scan_.has_name ? std::string_view(scan_.name) : std::string_view(); }
  std::string_view arguments(std::string_view object);

 private:
  enum class State { start, key_space, key, colon, value_space, value, after, done };
  ToolFormat format_;
  CallScan scan_;
  State state_ = State::start;
  size_t i_ = 0, key_begin_ = 0, value_begin_ = 0;
  bool first_ = true, escape_ = false, is_args_ = false;
  std::string key_;
  JsonValueEnd value_;
  bool whole_read_ = false;  // whole_ holds call_arguments' reading (empty where it failed)
  std::string whole_;
};

// A whole call's `arguments` as OpenAI reports it from the scanned value: an object's text as written, a string's
// contents (a string holding an object), "{}" when absent or null; false when it is anything else.
bool call_arguments(std::string_view text, const CallScan& scan, std::string& arguments);

// Mistral, as parse_mistral_tool_calls and the stream read it: the text after each [TOOL_CALLS] from the first one
// (at `at`) on, and their concatenation (vLLM drops every marker).
struct MistralSegments {
  std::vector<std::string_view> segments;
  std::string joined;
};
MistralSegments mistral_segments(std::string_view text, size_t at);

// Mistral's later tokenizers' form of one segment, name[ARGS]value (name[CALL_ID]id[ARGS]value where the template
// writes ids): the function's name and where the value begins (whitespace skipped); false while it is not so.
bool mistral_args_call(std::string_view segment, std::string_view& name, size_t& value);

}  // namespace attnzoo::answers
