#include "server/tool_calls.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <random>

#include "loader/json.h"
#include "loader/json_writer.h"

namespace attnzoo::server {
namespace {

bool all_space(std::string_view s) { return s.find_first_not_of(" \t\r\n") == std::string_view::npos; }

}  // namespace

std::string new_tool_call_id() {
  // A random 64-bit stem per process and a counter: unique within the process, unlikely to repeat across restarts.
  static const uint64_t stem = [] {
    std::random_device rd;
    return (uint64_t(rd()) << 32) ^ rd();
  }();
  static std::atomic<uint32_t> counter{0};
  char buf[32];
  std::snprintf(buf, sizeof buf, "call_%016llx%08x", static_cast<unsigned long long>(stem), unsigned(counter++));
  return buf;
}

bool parse_tool_call_json(std::string_view text, ToolCall& call) {
  json::Value v;
  try {
    v = json::parse(text);
  } catch (const std::exception&) {
    return false;
  }
  if (!v.is_object()) return false;
  const json::Value* name = v.find("name");
  if (!name || !name->is_string() || name->as_string().empty()) return false;
  const json::Value* args = v.find("arguments");
  std::string arguments = "{}";
  if (args && args->is_string()) {
    // Some models write the arguments as a JSON string holding the object; OpenAI's field is that string.
    try {
      if (!json::parse(args->as_string()).is_object()) return false;
    } catch (const std::exception&) {
      return false;
    }
    arguments = args->as_string();
  } else if (args && !args->is_null()) {
    if (!args->is_object()) return false;
    json::Writer w;
    w.value(*args);
    arguments = w.take();
  }
  call.name = name->as_string();
  call.arguments = std::move(arguments);
  call.id = new_tool_call_id();
  return true;
}

ParsedAnswer parse_hermes_tool_calls(std::string_view text) {
  ParsedAnswer out;
  size_t at = text.find(kToolCallOpen);
  out.content = std::string(text.substr(0, at));
  while (at != std::string_view::npos) {
    const size_t body = at + kToolCallOpen.size();
    const size_t close = text.find(kToolCallClose, body);
    const size_t end = close == std::string_view::npos ? text.size() : close + kToolCallClose.size();
    ToolCall call;
    if (parse_tool_call_json(text.substr(body, (close == std::string_view::npos ? text.size() : close) - body), call))
      out.calls.push_back(std::move(call));
    else
      out.content += text.substr(at, end - at);
    // Text between and after blocks (usually a newline) is kept unless it is only whitespace.
    const size_t next = text.find(kToolCallOpen, end);
    const std::string_view between =
        text.substr(end, next == std::string_view::npos ? std::string_view::npos : next - end);
    if (!all_space(between)) out.content += between;
    at = next;
  }
  return out;
}

ParsedAnswer read_answer(std::string_view text, ToolMode mode, bool parallel) {
  ParsedAnswer out;
  if (mode == ToolMode::text) {
    out.content = std::string(text);
    return out;
  }
  if (mode == ToolMode::forced) {
    ToolCall call;
    if (parse_tool_call_json(text, call)) out.calls.push_back(std::move(call));
    else out.content = std::string(text);  // cut short ("length"): what there is, as text
    return out;
  }
  out = parse_hermes_tool_calls(text);
  if (!parallel && out.calls.size() > 1) out.calls.resize(1);
  return out;
}

}  // namespace attnzoo::server
