#include "answers/tool_call_scan.h"

#include "loader/json.h"
#include "loader/json_try_parse.h"

namespace attnzoo::answers {
namespace {

// One past the string token that opens at s[at] ('"'); npos while it is open.
size_t string_end(std::string_view s, size_t at) {
  for (size_t i = at + 1; i < s.size(); ++i) {
    if (s[i] == '\\') ++i;
    else if (s[i] == '"') return i + 1;
  }
  return std::string_view::npos;
}

bool unquote(std::string_view token, std::string& out) {
  if (token.find('\\') == std::string_view::npos) {
    out = std::string(token.substr(1, token.size() - 2));
    return true;
  }
  const std::optional<json::Value> v = json::try_parse(token);
  if (!v || !v->is_string()) return false;
  out = v->as_string();
  return true;
}

}  // namespace

size_t skip_json_space(std::string_view s, size_t i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) ++i;
  return i;
}

size_t json_value_end(std::string_view s, size_t at) {
  if (at >= s.size()) return std::string_view::npos;
  if (s[at] == '"') return string_end(s, at);
  if (s[at] == '{' || s[at] == '[') {
    int depth = 0;
    for (size_t i = at; i < s.size(); ++i) {
      const char c = s[i];
      if (c == '"') {
        i = string_end(s, i);
        if (i == std::string_view::npos) return i;
        --i;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        if (--depth == 0) return i + 1;
      }
    }
    return std::string_view::npos;
  }
  const size_t end = s.find_first_of(",}] \t\r\n", at);
  return end;
}

CallScan scan_call_object(std::string_view s, ToolFormat format) {
  CallScan out;
  if (s.empty() || s[0] != '{') {
    out.broken = !s.empty();
    return out;
  }
  size_t i = 1;
  bool first = true;
  while (true) {
    i = skip_json_space(s, i);
    if (i >= s.size()) return out;
    if (first && s[i] == '}') {
      out.closed = true;
      out.end = i + 1;
      return out;
    }
    first = false;
    if (s[i] != '"') {
      out.broken = true;
      return out;
    }
    const size_t key_end = string_end(s, i);
    if (key_end == std::string_view::npos) return out;
    std::string key;
    if (!unquote(s.substr(i, key_end - i), key)) {
      out.broken = true;
      return out;
    }
    i = skip_json_space(s, key_end);
    if (i >= s.size()) return out;
    if (s[i] != ':') {
      out.broken = true;
      return out;
    }
    i = skip_json_space(s, i + 1);
    if (i >= s.size()) return out;
    const bool args = out.args_begin == CallScan::npos &&
                      (key == "arguments" || (format == ToolFormat::llama3_json && key == "parameters"));
    if (args) out.args_begin = i;
    const size_t value_end = json_value_end(s, i);
    if (value_end == std::string_view::npos) return out;
    if (args) out.args_end = value_end;
    if (key == "name" && !out.has_name && s[i] == '"')
      out.has_name = unquote(s.substr(i, value_end - i), out.name);
    i = skip_json_space(s, value_end);
    if (i >= s.size()) return out;
    if (s[i] == '}') {
      out.closed = true;
      out.end = i + 1;
      return out;
    }
    if (s[i] != ',') {
      out.broken = true;
      return out;
    }
    ++i;
  }
}

size_t JsonValueEnd::advance(std::string_view s) {
  if (end_ != npos || s.empty()) return end_;
  const char first = s[0];
  if (first == '"') {
    if (i_ == 0) i_ = 1;
    for (; i_ < s.size(); ++i_) {
      if (escape_) escape_ = false;
      else if (s[i_] == '\\') escape_ = true;
      else if (s[i_] == '"') return end_ = i_ + 1;
    }
    return npos;
  }
  if (first == '{' || first == '[') {
    for (; i_ < s.size(); ++i_) {
      const char c = s[i_];
      if (in_string_) {
        if (escape_) escape_ = false;
        else if (c == '\\') escape_ = true;
        else if (c == '"') in_string_ = false;
      } else if (c == '"') {
        in_string_ = true;
      } else if (c == '{' || c == '[') {
        ++depth_;
      } else if ((c == '}' || c == ']') && --depth_ == 0) {
        return end_ = i_ + 1;
      }
    }
    return npos;
  }
  // A scalar runs to the next ',', '}', ']' or whitespace (the first byte included: `{"name": }` ends at once).
  const size_t end = s.find_first_of(",}] \t\r\n", i_);
  i_ = s.size();
  return end_ = end;
}

void CallObjectScanner::advance(std::string_view s) {
  // The states are scan_call_object's loop cut where the text may run out; each resumes where the last one stopped.
  const auto fail = [&] {
    scan_.broken = true;
    state_ = State::done;
  };
  const auto close = [&] {
    scan_.closed = true;
    scan_.end = i_ + 1;
    state_ = State::done;
  };
  for (;;) {
    switch (state_) {
      case State::start:
        if (s.empty()) return;
        if (s[0] != '{') return fail();
        i_ = 1;
        state_ = State::key_space;
        break;
      case State::key_space:
        i_ = skip_json_space(s, i_);
        if (i_ >= s.size()) return;
        if (first_ && s[i_] == '}') return close();
        first_ = false;
        if (s[i_] != '"') return fail();
        key_begin_ = i_++;
        escape_ = false;
        state_ = State::key;
        break;
      case State::key:
        for (; i_ < s.size(); ++i_) {
          if (escape_) escape_ = false;
          else if (s[i_] == '\\') escape_ = true;
          else if (s[i_] == '"') break;
        }
        if (i_ >= s.size()) return;
        ++i_;
        if (!unquote(s.substr(key_begin_, i_ - key_begin_), key_)) return fail();
        state_ = State::colon;
        break;
      case State::colon:
        i_ = skip_json_space(s, i_);
        if (i_ >= s.size()) return;
        if (s[i_] != ':') return fail();
        ++i_;
        state_ = State::value_space;
        break;
      case State::value_space:
        i_ = skip_json_space(s, i_);
        if (i_ >= s.size()) return;
        is_args_ = scan_.args_begin == CallScan::npos &&
                   (key_ == "arguments" || (format_ == ToolFormat::llama3_json && key_ == "parameters"));
        if (is_args_) scan_.args_begin = i_;
        value_begin_ = i_;
        value_.reset();
        state_ = State::value;
        break;
      case State::value: {
        const size_t end = value_.advance(s.substr(value_begin_));
        if (end == JsonValueEnd::npos) {
          i_ = s.size();
          return;
        }
        i_ = value_begin_ + end;
        if (is_args_) scan_.args_end = i_;
        if (key_ == "name" && !scan_.has_name && s[value_begin_] == '"')
          scan_.has_name = unquote(s.substr(value_begin_, i_ - value_begin_), scan_.name);
        state_ = State::after;
        break;
      }
      case State::after:
        i_ = skip_json_space(s, i_);
        if (i_ >= s.size()) return;
        if (s[i_] == '}') return close();
        if (s[i_] != ',') return fail();
        ++i_;
        state_ = State::key_space;
        break;
      case State::done:
        return;
    }
  }
}

std::string_view CallObjectScanner::arguments(std::string_view object) {
  if (scan_.broken) return {};
  if (scan_.args_begin != CallScan::npos && object[scan_.args_begin] == '{') {
    const size_t end = scan_.args_end != CallScan::npos ? scan_.args_end : object.size();
    return object.substr(scan_.args_begin, end - scan_.args_begin);
  }
  if (scan_.args_end == CallScan::npos && !scan_.closed) return {};
  // Whole from here on (the value, or the object without one): read once.
  if (!whole_read_ && !call_arguments(object, scan_, whole_)) whole_.clear();
  whole_read_ = true;
  return whole_;
}

bool call_arguments(std::string_view s, const CallScan& scan, std::string& arguments) {
  if (scan.args_begin == CallScan::npos) {
    arguments = "{}";
    return true;
  }
  if (scan.args_end == CallScan::npos) return false;
  const std::string_view raw = s.substr(scan.args_begin, scan.args_end - scan.args_begin);
  const std::optional<json::Value> v = json::try_parse(raw);
  if (!v) return false;
  if (v->is_null()) {
    arguments = "{}";
  } else if (v->is_object()) {
    arguments = std::string(raw);  // as the model wrote it: what streaming sent, byte for byte
  } else if (v->is_string()) {
    // Some models write the arguments as a JSON string holding the object; OpenAI's field is that string.
    const std::optional<json::Value> inner = json::try_parse(v->as_string());
    if (!inner || !inner->is_object()) return false;
    arguments = v->as_string();
  } else {
    return false;
  }
  return true;
}

MistralSegments mistral_segments(std::string_view text, size_t at) {
  MistralSegments out;
  for (size_t from = at; from != std::string_view::npos;) {
    const size_t begin = from + kMistralCalls.size();
    const size_t next = text.find(kMistralCalls, begin);
    out.segments.push_back(
        text.substr(begin, next == std::string_view::npos ? std::string_view::npos : next - begin));
    out.joined += out.segments.back();
    from = next;
  }
  return out;
}

bool mistral_args_call(std::string_view segment, std::string_view& name, size_t& value) {
  static constexpr std::string_view kArgs = "[ARGS]", kCallId = "[CALL_ID]";
  const size_t args = segment.find(kArgs);
  if (args == std::string_view::npos) return false;
  name = segment.substr(0, args);
  if (const size_t id = name.find(kCallId); id != std::string_view::npos) name = name.substr(0, id);
  if (name.empty() || name.find_first_of(" \t\r\n{[\"") != std::string_view::npos) return false;
  value = skip_json_space(segment, args + kArgs.size());
  return true;
}

}  // namespace attnzoo::answers
