#include "answers/tool_stream.h"

#include "engine/stop.h"  // tag_overlap: a tail that may still become a marker
#include "answers/tool_call_scan.h"
#include "answers/tool_format_pythonic.h"

namespace attnzoo::answers {
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

namespace {

// Where a search that found no `marker` in `text` resumes: one cut by the text's end begins in its last bytes.
size_t search_resume(std::string_view text, std::string_view marker, size_t from) {
  return std::max(from, text.size() >= marker.size() ? text.size() - marker.size() + 1 : size_t{0});
}

// Mistral's name[ARGS]value segment read whole (`last`: the answer's last segment, which may still grow): its name,
// and the arguments that may be sent (an object's text as written, any other value once whole); false while it is
// not such a segment.
bool mistral_segment_call(std::string_view segment, bool last, std::string& name, std::string& arguments) {
  std::string_view n;
  size_t at = 0;
  if (!mistral_args_call(segment, n, at)) return false;
  name = std::string(n);
  const std::string_view value = segment.substr(at);
  const size_t end = json_value_end(value, 0);
  if (!value.empty() && value[0] == '{') {
    arguments = std::string(value.substr(0, end == std::string_view::npos ? value.size() : end));
  } else if (end != std::string_view::npos || !last) {
    CallScan scan;
    scan.args_begin = 0;
    scan.args_end = end == std::string_view::npos ? value.size() : end;
    if (!call_arguments(value, scan, arguments)) arguments.clear();
  }
  return true;
}

constexpr std::string_view kMistralArgs = "[ARGS]";

}  // namespace

void ToolCallStream::offer(size_t i, std::string_view name, std::string_view arguments, ToolStreamStep& out) {
  if (name.empty() || !(parallel_ || i == 0) || i > sent_.size()) return;
  if (i == sent_.size()) {
    sent_.push_back({new_tool_call_id(format_), std::string(name), std::string(arguments)});
    out.calls.push_back({i, true, sent_[i].id, std::string(name), std::string(arguments)});
    return;
  }
  std::string& sent = sent_[i].arguments;
  if (arguments.size() <= sent.size()) return;
  out.calls.push_back({i, false, "", "", std::string(arguments.substr(sent.size()))});
  sent.append(arguments.substr(sent.size()));
}

void ToolCallStream::read_objects(std::string_view text, char separator, ToolStreamStep& out) {
  for (;;) {
    switch (phase_) {
      case Phase::next:
        pos_ = skip_json_space(text, pos_);
        if (pos_ >= text.size()) return;
        if (text[pos_] != '{') {
          phase_ = Phase::stopped;  // not calls after all (content, at finish)
          return;
        }
        object_ = pos_;
        call_ = CallObjectScanner(format_);
        phase_ = Phase::object;
        break;
      case Phase::object: {
        const std::string_view object = text.substr(object_);
        call_.advance(object);
        if (call_.scan().broken) {
          phase_ = Phase::stopped;
          return;
        }
        offer(settled_, call_.name(), call_.arguments(object), out);
        if (!call_.scan().closed) return;
        if (separator == 0) {
          phase_ = Phase::stopped;
          return;
        }
        pos_ = object_ + call_.scan().end;
        phase_ = Phase::after;
        break;
      }
      case Phase::after:
        pos_ = skip_json_space(text, pos_);
        if (pos_ >= text.size()) return;
        if (text[pos_] != separator) {
          phase_ = Phase::stopped;
          return;
        }
        ++settled_;
        ++pos_;
        phase_ = Phase::next;
        break;
      default:
        return;
    }
  }
}

void ToolCallStream::read_hermes(std::string_view text, ToolStreamStep& out) {
  while (phase_ != Phase::stopped) {
    if (body_ == npos) {
      const size_t at = text.find(kToolCallOpen, pos_);
      if (at == npos) {
        pos_ = search_resume(text, kToolCallOpen, pos_);
        return;
      }
      body_ = pos_ = close_search_ = at + kToolCallOpen.size();
      phase_ = Phase::lead;
      call_ = CallObjectScanner(format_);
    }
    const size_t close = text.find(kToolCallClose, close_search_);
    close_search_ = close == npos ? search_resume(text, kToolCallClose, close_search_) : close;
    const size_t end = close == npos ? text.size() : close;
    if (phase_ == Phase::lead) {
      pos_ = skip_json_space(text.substr(0, end), pos_);
      if (pos_ == end) {
        if (close != npos) phase_ = Phase::stopped;  // an empty block: not a call, and none after it streams
        return;
      }
      object_ = pos_;
      phase_ = Phase::object;
    }
    // The block's text from its first non-space (a '{' or not: the scan says broken), cut at </tool_call>.
    const std::string_view object = text.substr(object_, end - object_);
    call_.advance(object);
    if (call_.scan().broken) {
      phase_ = Phase::stopped;
      return;
    }
    offer(settled_, call_.name(), call_.arguments(object), out);
    if (close == npos) return;
    ++settled_;
    body_ = npos;
    pos_ = close + kToolCallClose.size();
  }
}

void ToolCallStream::read_llama3(std::string_view text, ToolStreamStep& out) {
  if (phase_ == Phase::lead) {
    // Only whitespace and one <|python_tag|> come before a call, each read once: pos_ follows them (a tag cut by the
    // text's end is read again, a tag's length at most).
    pos_ = skip_json_space(text, pos_);
    if (!python_tag_ && text.substr(pos_).starts_with(kPythonTag)) {
      python_tag_ = true;
      pos_ = skip_json_space(text, pos_ + kPythonTag.size());
    }
    if (pos_ >= text.size() || text[pos_] != '{') return;
    phase_ = Phase::next;
  }
  read_objects(text, ';', out);
}

void ToolCallStream::read_mistral(std::string_view text, ToolStreamStep& out) {
  if (mistral_first_ == npos) {
    // (No marker begins in the content sent: the search starts where it stopped.)
    mistral_first_ = text.find(kMistralCalls, content_sent_);
    if (mistral_first_ == npos) return;
    joined_upto_ = mistral_first_ + kMistralCalls.size();
    segments_ = {0};
  }
  // The new text joined, its markers dropped (none is cut by the definite text's end: a tail that may begin one is
  // held back).
  for (;;) {
    const size_t next = text.find(kMistralCalls, joined_upto_);
    joined_.append(text.substr(joined_upto_, (next == npos ? text.size() : next) - joined_upto_));
    if (next == npos) {
      joined_upto_ = text.size();
      break;
    }
    segments_.push_back(joined_.size());
    joined_upto_ = next + kMistralCalls.size();
  }
  if (phase_ == Phase::lead) {
    pos_ = skip_json_space(joined_, pos_);
    if (pos_ == joined_.size()) return;
    // One object, or an array of them; else name[ARGS]value segments.
    mistral_json_ = joined_[pos_] == '{' || joined_[pos_] == '[';
    array_ = joined_[pos_] == '[';
    if (array_) ++pos_;
    phase_ = Phase::next;
  }
  if (mistral_json_) read_objects(joined_, array_ ? ',' : 0, out);
  else read_mistral_args(out);
}

void ToolCallStream::read_mistral_args(ToolStreamStep& out) {
  const std::string_view r = joined_;
  // Segments a later [TOOL_CALLS] ended: read whole, once.
  for (; phase_ != Phase::stopped && args_read_ + 1 < segments_.size(); ++args_read_) {
    std::string name, arguments;
    const size_t begin = segments_[args_read_];
    if (!mistral_segment_call(r.substr(begin, segments_[args_read_ + 1] - begin), false, name, arguments)) {
      phase_ = Phase::stopped;
      return;
    }
    offer(args_read_, name, arguments, out);
    args_search_ = 0;
    value_ = npos;
    args_whole_read_ = false;
    args_value_.reset();
  }
  if (phase_ == Phase::stopped) return;
  // The last segment, read on from where the last push stopped: [ARGS], the name before it, the value's end.
  const std::string_view segment = r.substr(segments_.back());
  if (value_ == npos) {
    const size_t args = segment.find(kMistralArgs, args_search_);
    if (args == npos) {
      args_search_ = search_resume(segment, kMistralArgs, args_search_);
      return;
    }
    std::string_view name;
    if (!mistral_args_call(segment.substr(0, args + kMistralArgs.size()), name, value_)) {
      phase_ = Phase::stopped;  // (its name is what precedes its first [ARGS]: it stays wrong)
      return;
    }
    args_name_ = std::string(name);
  }
  value_ = skip_json_space(segment, value_);
  const std::string_view value = segment.substr(value_);
  std::string_view arguments;
  const size_t end = value.empty() ? npos : args_value_.advance(value);
  if (!value.empty() && value[0] == '{') {
    arguments = value.substr(0, end == npos ? value.size() : end);
  } else if (end != npos) {
    if (!args_whole_read_) {
      CallScan scan;
      scan.args_begin = 0;
      scan.args_end = end;
      if (!call_arguments(value, scan, args_whole_)) args_whole_.clear();
      args_whole_read_ = true;
    }
    arguments = args_whole_;
  }
  offer(args_read_, args_name_, arguments, out);
}

void ToolCallStream::send(const std::vector<Partial>& calls, ToolStreamStep& out) {
  // The stream announces calls in the answer's order and stops at the first it cannot read, so the sent calls the
  // whole answer keeps come first and in order; a sent call no whole call continues went stale (an empty `sent`
  // extends every text: the name, and Kimi's id, tell the calls apart).
  size_t next = 0;  // the first sent call not yet matched
  for (size_t k = 0; k < calls.size() && (parallel_ || k == 0); ++k) {
    const Partial& c = calls[k];
    if (c.name.empty()) return;  // calls are announced in order, each once its name is whole
    const auto same = [&c](const Sent& s) {
      return s.name == c.name && (c.id.empty() || s.id == c.id) && c.arguments.starts_with(s.arguments);
    };
    while (next < sent_.size() && !same(sent_[next])) ++next;
    if (next == sent_.size()) {  // not sent: whole, at a new index (after any stale one)
      sent_.push_back({c.id.empty() ? new_tool_call_id(format_) : c.id, c.name, c.arguments});
      out.calls.push_back({next, true, sent_[next].id, c.name, c.arguments});
    } else if (std::string& sent = sent_[next].arguments; c.arguments.size() > sent.size()) {
      out.calls.push_back({next, false, "", "", c.arguments.substr(sent.size())});
      sent = c.arguments;
    }
    ++next;
  }
}

ToolStreamStep ToolCallStream::push(std::string_view text) {
  answer_ += text;
  ToolStreamStep out;
  if (mode_ == ToolMode::automatic) {
    if (format_ == ToolFormat::llama3_json || format_ == ToolFormat::pythonic) {
      // Calls only at the answer's start (vLLM's llama3_json, pythonic): held while it may begin them, then all of
      // it streams.
      // The leading whitespace is read once: lead_ follows it.
      lead_ = std::min(answer_.find_first_not_of(" \t\r\n", lead_), answer_.size());
      const std::string_view rest = std::string_view(answer_).substr(lead_);
      const bool may_be_calls =
          format_ == ToolFormat::pythonic ? may_be_pythonic_calls(rest) : may_be_llama3_calls(rest);
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
        sent_.push_back({d.id.empty() ? new_tool_call_id(format_) : d.id, d.name, d.arguments});
        out.calls.push_back({d.index, true, sent_.back().id, std::move(d.name), std::move(d.arguments)});
      } else {
        sent_.at(d.index).arguments += d.arguments;
        out.calls.push_back({d.index, false, "", "", std::move(d.arguments)});
      }
    }
    return out;
  }
  if (format_ == ToolFormat::hermes) {
    read_hermes(definite(), out);
  } else if (format_ == ToolFormat::llama3_json) {
    read_llama3(definite(), out);
  } else if (format_ == ToolFormat::mistral) {
    read_mistral(definite(), out);
  } else if (format_ == ToolFormat::pythonic) {
    const std::vector<PythonicCallStream::Call>& calls = pythonic_.calls();
    for (size_t i = pythonic_.feed(definite()); i < calls.size(); ++i)
      offer(i, calls[i].name, calls[i].arguments, out);
  }
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
  send(calls, out);
  finished_ = true;
  whole_called_ = !a.calls.empty();
  return out;
}

}  // namespace attnzoo::answers
