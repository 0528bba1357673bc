#include "server/tool_format_sections.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "loader/json.h"

namespace attnzoo::server {
namespace {

constexpr size_t npos = std::string_view::npos;

bool all_space(std::string_view s) { return s.find_first_not_of(" \t\r\n") == npos; }

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

bool plain_name(std::string_view s) { return !s.empty() && s.find_first_of(" \t\r\n<>{}\"") == npos; }

// The arguments: `text` itself, trimmed, when it is one whole JSON object (false otherwise).
bool arguments_object(std::string_view text, std::string& out) {
  json::Value v;
  try {
    v = json::parse(text);
  } catch (const std::exception&) {
    return false;
  }
  if (!v.is_object()) return false;
  out = std::string(trim(text));  // as the model wrote it, as the other formats and vLLM's parsers keep it
  return true;
}

struct Markers {
  std::string_view section_begin, section_end, call_begin, call_end;
};

using BodyReader = std::function<bool(std::string_view body, ToolCall& call)>;

// The next occurrence of a marker at or after a position that only grows: each marker is searched for again only once
// the position has passed its last find, so an answer of many calls is read in one pass (no quadratic rescans
// where an end marker is missing).
class NextMarker {
 public:
  NextMarker(std::string_view text, std::string_view marker) : text_(text), marker_(marker) {}
  size_t from(size_t pos) {
    if (searched_ && (at_ == npos || at_ >= pos)) return at_;
    searched_ = true;
    at_ = text_.find(marker_, pos);
    return at_;
  }

 private:
  std::string_view text_, marker_;
  size_t at_ = npos;
  bool searched_ = false;
};

ParsedAnswer parse_section(std::string_view text, const Markers& m, const BodyReader& read_body) {
  ParsedAnswer out;
  out.content = std::string(text);
  const size_t at = text.find(m.section_begin);
  if (at == npos) return out;
  std::string content(text.substr(0, at));
  std::vector<ToolCall> calls;
  const auto keep = [&](std::string_view stray) {
    if (!all_space(stray)) content += stray;
  };
  size_t pos = at + m.section_begin.size();
  NextMarker next_call(text, m.call_begin), next_close(text, m.call_end), next_section_end(text, m.section_end);
  for (;;) {
    const size_t call = next_call.from(pos);
    const size_t section_end = next_section_end.from(pos);
    if (call == npos || (section_end != npos && section_end < call)) {
      if (section_end == npos) {
        keep(text.substr(pos));
      } else {
        keep(text.substr(pos, section_end - pos));
        keep(text.substr(section_end + m.section_end.size()));
      }
      break;
    }
    keep(text.substr(pos, call - pos));
    const size_t body = call + m.call_begin.size();
    // A call the model never closed ends where the next call or the section's end begins, or with the answer.
    const size_t close = next_close.from(body);
    const size_t limit = std::min({close, next_call.from(body), next_section_end.from(body), text.size()});
    const size_t end = limit == close ? close + m.call_end.size() : limit;
    ToolCall c;
    if (read_body(text.substr(body, limit - body), c)) calls.push_back(std::move(c));
    else content += text.substr(call, end - call);
    pos = end;
  }
  if (calls.empty()) return out;
  out.content = std::move(content);
  out.calls = std::move(calls);
  return out;
}

constexpr Markers kDeepSeek{kDeepSeekCallsBegin, kDeepSeekCallsEnd, kDeepSeekCallBegin, kDeepSeekCallEnd};
constexpr Markers kKimi{kKimiSectionBegin, kKimiSectionEnd, kKimiCallBegin, kKimiCallEnd};

}  // namespace

ParsedAnswer parse_deepseek_v3_tool_calls(std::string_view text) {
  return parse_section(text, kDeepSeek, [](std::string_view body, ToolCall& call) {
    // TYPE<｜tool▁sep｜>NAME\n```json\n{...}\n```
    const size_t sep = body.find(kDeepSeekSep);
    if (sep == npos || !plain_name(trim(body.substr(0, sep)))) return false;
    std::string_view rest = body.substr(sep + kDeepSeekSep.size());
    const size_t line = rest.find('\n');
    if (line == npos) return false;
    const std::string_view name = trim(rest.substr(0, line));
    rest = trim(rest.substr(line + 1));
    if (!plain_name(name) || !rest.starts_with("```")) return false;
    const size_t fence_line = rest.find('\n');
    if (fence_line == npos) return false;
    const std::string_view lang = trim(rest.substr(3, fence_line - 3));
    if (!lang.empty() && lang != "json") return false;
    rest = rest.substr(fence_line + 1);
    // The closing fence may be missing where the answer was cut after the object.
    if (const size_t fence = rest.rfind("```"); fence != npos && all_space(rest.substr(fence + 3)))
      rest = rest.substr(0, fence);
    if (!arguments_object(trim(rest), call.arguments)) return false;
    call.name = std::string(name);
    call.id = new_tool_call_id(ToolFormat::deepseek_v3);
    return true;
  });
}

ParsedAnswer parse_deepseek_v31_tool_calls(std::string_view text) {
  return parse_section(text, kDeepSeek, [](std::string_view body, ToolCall& call) {
    // NAME<｜tool▁sep｜>{...}
    const size_t sep = body.find(kDeepSeekSep);
    if (sep == npos) return false;
    const std::string_view name = trim(body.substr(0, sep));
    if (!plain_name(name) || !arguments_object(trim(body.substr(sep + kDeepSeekSep.size())), call.arguments))
      return false;
    call.name = std::string(name);
    call.id = new_tool_call_id(ToolFormat::deepseek_v31);
    return true;
  });
}

ParsedAnswer parse_kimi_k2_tool_calls(std::string_view text) {
  return parse_section(text, kKimi, [](std::string_view body, ToolCall& call) {
    // functions.NAME:IDX<|tool_call_argument_begin|>{...}; the id is kept, the name is between the last '.' and ':'
    // of its first part (vLLM reads "NAME:IDX" too).
    const size_t arg = body.find(kKimiArgumentBegin);
    if (arg == npos) return false;
    const std::string_view id = trim(body.substr(0, arg));
    const size_t colon = id.rfind(':');
    if (colon == npos || colon + 1 == id.size() || !plain_name(id)) return false;
    for (char c : id.substr(colon + 1))
      if (c < '0' || c > '9') return false;
    std::string_view name = id.substr(0, id.find(':'));
    if (const size_t dot = name.rfind('.'); dot != npos) name = name.substr(dot + 1);
    if (name.empty() || !arguments_object(trim(body.substr(arg + kKimiArgumentBegin.size())), call.arguments))
      return false;
    call.name = std::string(name);
    call.id = std::string(id);
    return true;
  });
}

bool names_call_outside_json(ToolFormat f) {
  return f == ToolFormat::deepseek_v3 || f == ToolFormat::deepseek_v31 || f == ToolFormat::kimi_k2;
}

std::string forced_call_opening(ToolFormat f, std::string_view name) {
  const std::string n(name);
  switch (f) {
    case ToolFormat::deepseek_v3:
      return std::string(kDeepSeekCallsBegin) + std::string(kDeepSeekCallBegin) + "function" +
             std::string(kDeepSeekSep) + n + "\n```json\n";
    case ToolFormat::deepseek_v31:
      return std::string(kDeepSeekCallsBegin) + std::string(kDeepSeekCallBegin) + n + std::string(kDeepSeekSep);
    case ToolFormat::kimi_k2:
      return std::string(kKimiSectionBegin) + std::string(kKimiCallBegin) + "functions." + n + ":0" +
             std::string(kKimiArgumentBegin);
    default: break;
  }
  return {};
}

bool forced_section_call(ToolFormat f, std::string_view name, std::string_view arguments, ToolCall& call) {
  if (!names_call_outside_json(f) || !arguments_object(arguments, call.arguments)) return false;
  call.name = std::string(name);
  call.id = f == ToolFormat::kimi_k2 ? "functions." + call.name + ":0" : new_tool_call_id(f);
  return true;
}

}  // namespace attnzoo::server
