#include "answers/tool_calls.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <random>

#include "answers/tool_call_scan.h"
#include "answers/tool_format_pythonic.h"
#include "answers/tool_format_sections.h"
#include "core/error.h"
#include "loader/json.h"
#include "loader/json_try_parse.h"
#include "loader/json_writer.h"

namespace attnzoo::answers {
namespace {

bool all_space(std::string_view s) { return s.find_first_not_of(" \t\r\n") == std::string_view::npos; }

std::string_view trim_left(std::string_view s) {
  const size_t at = s.find_first_not_of(" \t\r\n");
  return at == std::string_view::npos ? std::string_view() : s.substr(at);
}

// The call object whose JSON text is `text` (leading whitespace allowed): a non-empty string "name" and arguments
// as call_arguments reads them, the arguments' text kept as written (what a stream sends).
bool call_from_text(std::string_view text, ToolCall& call, ToolFormat format) {
  const std::optional<json::Value> v = json::try_parse(text);
  if (!v || !v->is_object()) return false;
  const json::Value* name = v->find("name");
  if (!name || !name->is_string() || name->as_string().empty()) return false;
  const std::string_view object = trim_left(text);
  const CallScan scan = scan_call_object(object, format);
  if (!scan.closed || !call_arguments(object, scan, call.arguments)) return false;
  call.name = name->as_string();
  call.id = new_tool_call_id(format);
  return true;
}

uint64_t id_stem() {
  // A random 64-bit stem per process and a counter: unique within the process, unlikely to repeat across restarts.
  static const uint64_t stem = [] {
    std::random_device rd;
    return (uint64_t(rd()) << 32) ^ rd();
  }();
  return stem;
}

}  // namespace

// The formats --tool-call-parser names, in the order its error lists them.
constexpr ToolFormat kNamedFormats[] = {ToolFormat::hermes, ToolFormat::llama3_json, ToolFormat::mistral,
                                        ToolFormat::openai, ToolFormat::deepseek_v3, ToolFormat::deepseek_v31,
                                        ToolFormat::kimi_k2, ToolFormat::pythonic};

ToolFormat parse_tool_call_parser(std::string_view name) {
  std::string names;
  for (ToolFormat f : kNamedFormats) {
    if (name == tool_format_name(f)) return f;
    names += (names.empty() ? "" : ", ") + std::string(tool_format_name(f));
  }
  throw ArgumentError("--tool-call-parser: \"" + std::string(name) + "\" is not one of " + names);
}

const char* tool_format_name(ToolFormat f) {
  switch (f) {
    case ToolFormat::hermes: return "hermes";
    case ToolFormat::llama3_json: return "llama3_json";
    case ToolFormat::mistral: return "mistral";
    case ToolFormat::openai: return "openai";
    case ToolFormat::deepseek_v3: return "deepseek_v3";
    case ToolFormat::deepseek_v31: return "deepseek_v31";
    case ToolFormat::kimi_k2: return "kimi_k2";
    case ToolFormat::pythonic: return "pythonic";
    case ToolFormat::none: break;
  }
  return "none";
}

ToolFormat detect_tool_format(std::string_view src) {
  // Harmony's channel marker is in no other family's template, and gpt-oss's answers are harmony with or without
  // tools.
  if (src.find("<|channel|>") != std::string_view::npos) return ToolFormat::openai;
  // Hermes first: Hermes 3 (a Llama 3.1 fine-tune) keeps Llama's special tokens but writes <tool_call> blocks.
  if (src.find(kToolCallOpen) != std::string_view::npos) return ToolFormat::hermes;
  if (src.find(kMistralCalls) != std::string_view::npos) return ToolFormat::mistral;
  if (src.find(kKimiSectionBegin) != std::string_view::npos) return ToolFormat::kimi_k2;
  // DeepSeek-V3 / R1 fence the arguments ('```json'); V3.1 writes them right after the separator.
  if (src.find(kDeepSeekSep) != std::string_view::npos)
    return src.find("```json") != std::string_view::npos ? ToolFormat::deepseek_v3 : ToolFormat::deepseek_v31;
  // Before Llama's markers: the pythonic Llama 3.2 template keeps "Environment: ipython".
  if (src.find("[func_name1(") != std::string_view::npos) return ToolFormat::pythonic;
  // Llama 3.2's template has no <|python_tag|> (it has no builtin tools) but sets "Environment: ipython" for tools.
  if (src.find(kPythonTag) != std::string_view::npos || src.find("Environment: ipython") != std::string_view::npos)
    return ToolFormat::llama3_json;
  return ToolFormat::none;
}

std::string_view tool_call_marker(ToolFormat f) {
  switch (f) {
    case ToolFormat::hermes: return kToolCallOpen;
    case ToolFormat::llama3_json: return kPythonTag;
    case ToolFormat::mistral: return kMistralCalls;
    case ToolFormat::openai: return "<|channel|>";
    case ToolFormat::deepseek_v3:
    case ToolFormat::deepseek_v31: return kDeepSeekCallsBegin;
    case ToolFormat::kimi_k2: return kKimiSectionBegin;
    case ToolFormat::pythonic: return "[";
    case ToolFormat::none: break;
  }
  return {};
}

std::string new_tool_call_id(ToolFormat format) {
  static std::atomic<uint32_t> counter{0};
  const uint64_t stem = id_stem();
  if (format == ToolFormat::mistral) {
    // splitmix64 of stem + counter: distinct inputs spread over 62^9 ids (Mistral's templates check length 9).
    uint64_t z = stem + 0x9e3779b97f4a7c15ull * (uint64_t(counter++) + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    static constexpr char kAlnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    std::string id(9, '0');
    for (char& c : id) {
      c = kAlnum[z % 62];
      z /= 62;
    }
    return id;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "call_%016llx%08x", static_cast<unsigned long long>(stem), unsigned(counter++));
  return buf;
}

bool parse_tool_call_json(std::string_view text, ToolCall& call, ToolFormat format) {
  return call_from_text(text, call, format);
}

ParsedAnswer parse_hermes_tool_calls(std::string_view text) {
  // vLLM's hermes: every block must be a call, or the whole answer is content (its json.loads of each block sits
  // in one try). Text between and after blocks is kept (vLLM drops it) unless it is only whitespace.
  ParsedAnswer out;
  size_t at = text.find(kToolCallOpen);
  out.content = std::string(text.substr(0, at));
  while (at != std::string_view::npos) {
    const size_t body = at + kToolCallOpen.size();
    const size_t close = text.find(kToolCallClose, body);
    const size_t end = close == std::string_view::npos ? text.size() : close + kToolCallClose.size();
    ToolCall call;
    if (!parse_tool_call_json(text.substr(body, (close == std::string_view::npos ? text.size() : close) - body), call))
      return ParsedAnswer{std::string(text), {}};
    out.calls.push_back(std::move(call));
    const size_t next = text.find(kToolCallOpen, end);
    const std::string_view between =
        text.substr(end, next == std::string_view::npos ? std::string_view::npos : next - end);
    if (!all_space(between)) out.content += between;
    at = next;
  }
  return out;
}

ParsedAnswer parse_llama3_tool_calls(std::string_view text) {
  // vLLM's llama3_json: calls only where the answer begins with <|python_tag|> or '{' (leading whitespace allowed
  // here), and then the whole answer is calls separated by ';'; anything else, or one piece that is not a call, and
  // the whole answer is content.
  ParsedAnswer out;
  out.content = std::string(text);
  std::string_view rest = trim_left(text);
  if (rest.starts_with(kPythonTag)) rest = trim_left(rest.substr(kPythonTag.size()));
  if (!rest.starts_with("{")) return out;
  std::vector<ToolCall> calls;
  while (!rest.empty()) {
    const size_t end = rest.starts_with("{") ? json_value_end(rest, 0) : std::string_view::npos;
    ToolCall call;
    if (end == std::string_view::npos || !parse_tool_call_json(rest.substr(0, end), call, ToolFormat::llama3_json))
      return out;
    calls.push_back(std::move(call));
    rest = trim_left(rest.substr(end));
    if (rest.starts_with(";")) rest = trim_left(rest.substr(1));
    else if (!rest.empty()) return out;
  }
  out.content.clear();
  out.calls = std::move(calls);
  return out;
}

// Mistral's later tokenizers (Small 3.x, Magistral): [TOOL_CALLS]name[ARGS]{...} per call, [CALL_ID]id between
// name and [ARGS] where the template writes one. `segments`: the text after each [TOOL_CALLS].
bool mistral_args_calls(const std::vector<std::string_view>& segments, std::vector<ToolCall>& calls) {
  for (std::string_view seg : segments) {
    std::string_view name;
    size_t value = 0;
    if (!mistral_args_call(seg, name, value)) return false;
    // The arguments' text as written (trimmed), read as a call's "arguments" value.
    std::string_view raw = seg.substr(value);
    raw = raw.substr(0, raw.find_last_not_of(" \t\r\n") + 1);
    CallScan scan;
    scan.args_begin = 0;
    scan.args_end = raw.size();
    ToolCall call;
    if (raw.empty() || !call_arguments(raw, scan, call.arguments)) return false;
    call.name = std::string(name);
    call.id = new_tool_call_id(ToolFormat::mistral);
    calls.push_back(std::move(call));
  }
  return true;
}

ParsedAnswer parse_mistral_tool_calls(std::string_view text) {
  // vLLM's mistral: the text before [TOOL_CALLS] is the content; after it (every [TOOL_CALLS] dropped, as vLLM
  // drops them) a JSON array of calls, or one call object; or, from later tokenizers, name[ARGS]{...} after each
  // [TOOL_CALLS]. When that is not so, the whole answer is content.
  ParsedAnswer out;
  out.content = std::string(text);
  const size_t at = text.find(kMistralCalls);
  if (at == std::string_view::npos) return out;
  const MistralSegments m = mistral_segments(text, at);
  const std::string& rest = m.joined;
  std::vector<ToolCall> calls;
  const std::string_view first = trim_left(m.segments[0]);
  if (!first.starts_with("[") && !first.starts_with("{")) {
    if (!mistral_args_calls(m.segments, calls)) return out;
    out.content = std::string(text.substr(0, at));
    out.calls = std::move(calls);
    return out;
  }
  const std::optional<json::Value> v = json::try_parse(rest);
  if (!v) return out;
  // Each element read from its own text, so its arguments are as written.
  const auto add = [&](std::string_view element) {
    ToolCall call;
    if (!call_from_text(element, call, ToolFormat::mistral)) return false;
    calls.push_back(std::move(call));
    return true;
  };
  const std::string_view body = trim_left(rest);
  if (v->is_array()) {
    if (v->as_array().empty()) return out;
    for (size_t i = skip_json_space(body, 1); body[i] != ']';) {
      const size_t end = json_value_end(body, i);
      if (!add(body.substr(i, end - i))) return out;
      i = skip_json_space(body, end);
      if (body[i] == ',') i = skip_json_space(body, i + 1);
    }
  } else if (!add(body)) {
    return out;
  }
  out.content = std::string(text.substr(0, at));
  out.calls = std::move(calls);
  return out;
}

std::string_view forced_json_opening(ToolFormat format) {
  if (format == ToolFormat::hermes) return "<tool_call>\n";
  if (format == ToolFormat::mistral) return "[TOOL_CALLS][";
  return {};
}

ParsedAnswer forced_calls(std::string_view text, ToolFormat format) {
  const std::string opened = std::string(forced_json_opening(format)) + std::string(text);
  if (format == ToolFormat::hermes) return parse_hermes_tool_calls(opened);
  if (format == ToolFormat::mistral) {
    // The array is closed by "]" when the model wrote it, else left open after the last call.
    ParsedAnswer a = parse_mistral_tool_calls(opened);
    return a.calls.empty() ? parse_mistral_tool_calls(opened + "]") : a;
  }
  if (format == ToolFormat::llama3_json) return parse_llama3_tool_calls(text);
  ParsedAnswer a;  // other formats: the one call object
  ToolCall call;
  if (parse_tool_call_json(text, call, format)) a.calls.push_back(std::move(call));
  else a.content = std::string(text);
  return a;
}

ParsedAnswer read_answer(std::string_view text, ToolMode mode, bool parallel, ToolFormat format,
                         std::string_view forced_name) {
  ParsedAnswer out;
  if (mode == ToolMode::text) {
    out.content = std::string(text);
    return out;
  }
  if (mode == ToolMode::forced) {
    if (names_call_outside_json(format)) {  // DeepSeek, Kimi: the name was in the opening, the text its arguments
      ToolCall call;
      if (forced_section_call(format, forced_name, text, call)) out.calls.push_back(std::move(call));
      else out.content = std::string(text);  // cut short ("length"): what there is, as text
      return out;
    }
    // The prompt opened the call (ToolRequest::forced_prefix): the answer is read behind that opening by the
    // format's parser, one call or ("required") several in the format's syntax, and all of them whole; otherwise it
    // was cut short ("length") and what there is comes back as text.
    out = forced_calls(text, format);
    if (out.calls.empty() || !out.content.empty()) return ParsedAnswer{std::string(text), {}};
    if (!parallel && out.calls.size() > 1) out.calls.resize(1);
    return out;
  }
  switch (format) {
    case ToolFormat::llama3_json: out = parse_llama3_tool_calls(text); break;
    case ToolFormat::mistral: out = parse_mistral_tool_calls(text); break;
    case ToolFormat::deepseek_v3: out = parse_deepseek_v3_tool_calls(text); break;
    case ToolFormat::deepseek_v31: out = parse_deepseek_v31_tool_calls(text); break;
    case ToolFormat::kimi_k2: out = parse_kimi_k2_tool_calls(text); break;
    case ToolFormat::pythonic: out = parse_pythonic_tool_calls(text); break;
    default: out = parse_hermes_tool_calls(text); break;
  }
  if (!parallel && out.calls.size() > 1) out.calls.resize(1);
  return out;
}

}  // namespace attnzoo::answers
