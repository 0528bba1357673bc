#include "server/tool_stream.h"

#include "engine/stop.h"  // tag_overlap: a tail that may still become a marker
#include "server/tool_call_scan.h"
#include "server/tool_format_pythonic.h"

namespace attnzoo::server {
namespace {

// A Llama 3.x answer that may still turn out to be calls: so far only whitespace, or it begins with '{' or with
// (a part of) <|python_tag|>.
bool may_be_llama3_calls(std::string_view answer) {
  const size_t at = answer.find_first_not_of(" \t\r\n");
  if (at == std::string_view::npos) return true;
  const std::string_view t = answer.substr(at);
  return t.starts_with("{") || t.starts_with(kPythonTag) || kPythonTag.starts_with(t);
}

}  // namespace

ToolCallStream::ToolCallStream(ToolFormat format, ToolMode mode, bool parallel, std::string forced_name)
    : format_(format),
      mode_(mode),
      parallel_(parallel),
      forced_name_(std::move(forced_name)),
      // As forced_calls reads the answer: behind the opening the prompt ended with (for a format that names the
      // function outside the JSON, the section's and the call's openings: the stream reads it as a section).
      opening_(mode != ToolMode::forced            ? std::string()
               : names_call_outside_json(format) ? forced_call_opening(format, forced_name_)
                                                 : std::string(forced_json_opening(format))),
      answer_(opening_),
      sections_(format) {}

std::string_view ToolCallStream::definite() const {
  const std::string_view a = answer_;
  size_t hold = 0;
  if (format_ == ToolFormat::hermes)
    hold = std::max(tag_overlap(a, kToolCallOpen), tag_overlap(a, kToolCallClose));
  else if (format_ == ToolFormat::deepseek_v3 || format_ == ToolFormat::deepseek_v31)
    for (std::string_view m : {kDeepSeekCallsBegin, kDeepSeekCallBegin, kDeepSeekCallEnd, kDeepSeekCallsEnd})
      hold = std::max(hold, tag_overlap(a, m));
  else if (format_ == ToolFormat::kimi_k2)
    for (std::string_view m : {kKimiSectionBegin, kKimiCallBegin, kKimiCallEnd, kKimiSectionEnd})
      hold = std::max(hold, tag_overlap(a, m));
  else if (format_ != ToolFormat::llama3_json && !tool_call_marker(format_).empty())  // (Llama's tag only leads)
    hold = tag_overlap(a, tool_call_marker(format_));
  return a.substr(0, a.size() - hold);
}

// One call object's partial reading: its name once whole, and the arguments' text that may be sent. An object's
// text goes out as written as it grows; any other value only once whole (a string's contents, null's "{}").
static bool read_partial(std::string_view object, ToolFormat format, std::string& name, std::string& arguments,
                         bool& closed) {
  const CallScan scan = scan_call_object(object, format);
  closed = scan.closed;
  if (scan.broken) return false;
  name = scan.has_name ? scan.name : std::string();
  arguments.clear();
  if (scan.args_begin != CallScan::npos && object[scan.args_begin] == '{') {
    const size_t end = scan.args_end != CallScan::npos ? scan.args_end : object.size();
    arguments = std::string(object.substr(scan.args_begin, end - scan.args_begin));
  } else if (scan.args_end != CallScan::npos || scan.closed) {
    if (!call_arguments(object, scan, arguments)) arguments.clear();
  }
  return true;
}

ToolCallStream::Read ToolCallStream::hermes_calls(std::string_view text, size_t from) const {
  Read out;
  for (size_t at = text.find(kToolCallOpen, from); at != std::string_view::npos;) {
    const size_t body = at + kToolCallOpen.size();
    const size_t close = text.find(kToolCallClose, body);
    const std::string_view block =
        text.substr(body, close == std::string_view::npos ? std::string_view::npos : close - body);
    const size_t start = skip_json_space(block, 0);
    if (start == block.size()) return out;  // nothing yet (or an empty block: not a call)
    Partial p;
    bool closed = false;
    if (!read_partial(block.substr(start), format_, p.name, p.arguments, closed)) return out;
    out.calls.push_back(std::move(p));
    if (close == std::string_view::npos) return out;
    out.settled = out.calls.size();
    out.resume = close + kToolCallClose.size();
    at = text.find(kToolCallOpen, out.resume);
  }
  return out;
}

ToolCallStream::Read ToolCallStream::llama3_calls(std::string_view text, size_t from) const {
  Read out;
  size_t i = skip_json_space(text, from);
  if (from == 0 && text.substr(i).starts_with(kPythonTag)) i = skip_json_space(text, i + kPythonTag.size());
  while (i < text.size() && text[i] == '{') {
    Partial p;
    bool closed = false;
    const std::string_view object = text.substr(i);
    if (!read_partial(object, format_, p.name, p.arguments, closed)) return out;
    out.calls.push_back(std::move(p));
    if (!closed) return out;
    i = skip_json_space(text, i + scan_call_object(object, format_).end);
    if (i >= text.size() || text[i] != ';') return out;  // the end, or not calls after all (then content)
    out.settled = out.calls.size();
    out.resume = i + 1;
    i = skip_json_space(text, i + 1);
  }
  return out;
}

ToolCallStream::Read ToolCallStream::mistral_calls(std::string_view text, size_t from) const {
  Read out;
  // (No marker begins in the content sent: the search starts where it stopped.)
  const size_t first = text.find(kMistralCalls, content_sent_);
  if (first == std::string_view::npos) return out;
  const MistralSegments m = mistral_segments(text, first);
  const std::string_view r = m.joined;
  const size_t start = skip_json_space(r, 0);
  if (start == r.size()) return out;
  if (r[start] == '{' || r[start] == '[') {
    // One object, or an array of them (`from`: an offset into the joined segments, after a settled element's ',').
    size_t i = from > 0 ? skip_json_space(r, from) : r[start] == '[' ? skip_json_space(r, start + 1) : start;
    while (i < r.size() && r[i] == '{') {
      Partial p;
      bool closed = false;
      const std::string_view object = r.substr(i);
      if (!read_partial(object, format_, p.name, p.arguments, closed)) return out;
      out.calls.push_back(std::move(p));
      if (!closed || r[start] != '[') return out;
      i = skip_json_space(r, i + scan_call_object(object, format_).end);
      if (i >= r.size() || r[i] != ',') return out;
      out.settled = out.calls.size();
      out.resume = i + 1;
      i = skip_json_space(r, i + 1);
    }
    return out;
  }
  if (from > 0) return out;  // (only the JSON forms resume)
  // name[ARGS]{...} after each [TOOL_CALLS].
  for (size_t s = 0; s < m.segments.size(); ++s) {
    std::string_view name;
    size_t at = 0;
    if (!mistral_args_call(m.segments[s], name, at)) return out;
    const std::string_view value = m.segments[s].substr(at);
    Partial p;
    p.name = std::string(name);
    const bool last = s + 1 == m.segments.size();
    const size_t end = json_value_end(value, 0);
    if (!value.empty() && value[0] == '{') {
      p.arguments = std::string(value.substr(0, end == std::string_view::npos ? value.size() : end));
    } else if (end != std::string_view::npos || !last) {
      CallScan scan;
      scan.args_begin = 0;
      scan.args_end = end == std::string_view::npos ? value.size() : end;
      if (!call_arguments(value, scan, p.arguments)) p.arguments.clear();
    }
    out.calls.push_back(std::move(p));
  }
  return out;
}

ToolCallStream::Read ToolCallStream::pythonic_calls(std::string_view text, size_t from) const {
  PythonicSoFar p = pythonic_calls_so_far(text, from);
  Read out;
  for (auto& [name, arguments] : p.calls) out.calls.push_back({std::move(name), std::move(arguments), {}});
  out.settled = p.settled;
  out.resume = p.resume;
  return out;
}

std::vector<ToolCallStream::Partial> ToolCallStream::partial_calls(size_t& base) {
  const std::string_view text = definite();
  // (The sections have their own reader: push.)
  Read r = format_ == ToolFormat::hermes        ? hermes_calls(text, resume_)
           : format_ == ToolFormat::mistral     ? mistral_calls(text, resume_)
           : format_ == ToolFormat::llama3_json ? llama3_calls(text, resume_)
           : format_ == ToolFormat::pythonic    ? pythonic_calls(text, resume_)
                                                : Read{};
  base = settled_;
  settled_ += r.settled;
  if (r.settled > 0) resume_ = r.resume;
  return std::move(r.calls);
}

void ToolCallStream::send(const std::vector<Partial>& calls, size_t base, ToolStreamStep& out) {
  for (size_t i = base; i < base + calls.size() && (parallel_ || i == 0); ++i) {
    const Partial& c = calls[i - base];
    if (c.name.empty()) return;  // calls are announced in order, each once its name is whole
    if (i == sent_.size()) {
      sent_.push_back({c.id.empty() ? new_tool_call_id(format_) : c.id, c.arguments});
      out.calls.push_back({i, true, sent_[i].id, c.name, c.arguments});
      continue;
    }
    std::string& sent = sent_[i].arguments;
    if (c.arguments.size() > sent.size() && c.arguments.starts_with(sent)) {
      out.calls.push_back({i, false, "", "", c.arguments.substr(sent.size())});
      sent = c.arguments;
    }
  }
}

ToolStreamStep ToolCallStream::push(std::string_view text) {
  answer_ += text;
  ToolStreamStep out;
  if (mode_ == ToolMode::automatic) {
    if (format_ == ToolFormat::llama3_json || format_ == ToolFormat::pythonic) {
      // Calls only at the answer's start (vLLM's llama3_json, pythonic): held while it may begin them, then all of
      // it streams.
      const bool may_be_calls =
          format_ == ToolFormat::pythonic ? may_be_pythonic_calls(answer_) : may_be_llama3_calls(answer_);
      if (!(content_sent_ == 0 && may_be_calls)) {
        if (sent_.empty()) {
          out.content = answer_.substr(content_sent_);
          content_sent_ = answer_.size();
        }
        return out;
      }
    } else {
      // The content before the first marker streams as it comes (a tail that may begin it held back).
      const std::string_view d = definite();
      // (No marker begins in the content sent: the search starts where it stopped.)
      const size_t marker = d.find(tool_call_marker(format_), content_sent_);
      const size_t content = marker == std::string_view::npos ? d.size() : marker;
      if (content > content_sent_) {
        out.content = std::string(d.substr(content_sent_, content - content_sent_));
        content_sent_ = content;
      }
      if (marker == std::string_view::npos) return out;
    }
  }
  if (names_call_outside_json(format_)) {
    for (SectionCallStream::Delta& d : sections_.feed(definite())) {
      if (!parallel_ && d.index > 0) break;
      if (d.first) {
        sent_.push_back({d.id.empty() ? new_tool_call_id(format_) : d.id, d.arguments});
        out.calls.push_back({d.index, true, sent_.back().id, std::move(d.name), std::move(d.arguments)});
      } else {
        sent_.at(d.index).arguments += d.arguments;
        out.calls.push_back({d.index, false, "", "", std::move(d.arguments)});
      }
    }
    return out;
  }
  size_t base = 0;
  const std::vector<Partial> calls = partial_calls(base);
  send(calls, base, out);
  return out;
}

ToolStreamStep ToolCallStream::finish() {
  ToolStreamStep out;
  const ParsedAnswer a =
      read_answer(std::string_view(answer_).substr(opening_.size()), mode_, parallel_, format_, forced_name_);
  // What was sent is the start of the content (the text before the first call).
  if (a.content.size() > content_sent_) out.content = a.content.substr(content_sent_);
  content_sent_ = std::max(content_sent_, a.content.size());
  std::vector<Partial> calls;
  for (const ToolCall& c : a.calls)
    calls.push_back({c.name, c.arguments, format_ == ToolFormat::kimi_k2 ? c.id : std::string()});
  send(calls, 0, out);
  return out;
}

}  // namespace attnzoo::server
