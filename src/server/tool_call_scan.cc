#include "server/tool_call_scan.h"

#include "loader/json.h"

namespace attnzoo::server {
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
  try {
    const json::Value v = json::parse(token);
    if (!v.is_string()) return false;
    out = v.as_string();
    return true;
  } catch (const std::exception&) {
    return false;
  }
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

bool call_arguments(std::string_view s, const CallScan& scan, std::string& arguments) {
  if (scan.args_begin == CallScan::npos) {
    arguments = "{}";
    return true;
  }
  if (scan.args_end == CallScan::npos) return false;
  const std::string_view raw = s.substr(scan.args_begin, scan.args_end - scan.args_begin);
  try {
    const json::Value v = json::parse(raw);
    if (v.is_null()) {
      arguments = "{}";
    } else if (v.is_object()) {
      arguments = std::string(raw);  // as the model wrote it: what streaming sent, byte for byte
    } else if (v.is_string()) {
      // Some models write the arguments as a JSON string holding the object; OpenAI's field is that string.
      if (!json::parse(v.as_string()).is_object()) return false;
      arguments = v.as_string();
    } else {
      return false;
    }
  } catch (const std::exception&) {
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

}  // namespace attnzoo::server
