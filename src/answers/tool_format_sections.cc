#include "answers/tool_format_sections.h"

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <vector>

#include "loader/json.h"
#include "loader/json_try_parse.h"

namespace attnzoo::answers {
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
  const std::optional<json::Value> v = json::try_parse(text);
  if (!v || !v->is_object()) return false;
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

// A call block's head, the text before its arguments: whole (the name, Kimi's id, and where the arguments' '{'
// is), not yet whole (the text so far may still become one), or broken.
enum class Head { more, whole, broken };
struct CallHead {
  std::string name, id;
  size_t args = 0;
};

// The '{' at the first non-space at or after `i`.
Head object_start(std::string_view body, size_t i, CallHead& head) {
  i = body.find_first_not_of(" \t\r\n", i);
  if (i == npos) return Head::more;
  if (body[i] != '{') return Head::broken;
  head.args = i;
  return Head::whole;
}

// Kimi-K2's id, functions.NAME:IDX: its name (between the last '.' and the first ':'), false when it is not one.
bool kimi_id(std::string_view id, std::string& name) {
  const size_t colon = id.rfind(':');
  if (colon == npos || colon + 1 == id.size() || !plain_name(id)) return false;
  for (char c : id.substr(colon + 1))
    if (c < '0' || c > '9') return false;
  std::string_view n = id.substr(0, id.find(':'));
  if (const size_t dot = n.rfind('.'); dot != npos) n = n.substr(dot + 1);
  if (n.empty()) return false;
  name = std::string(n);
  return true;
}

Head read_head(ToolFormat f, std::string_view body, CallHead& head) {
  if (f == ToolFormat::kimi_k2) {
    // functions.NAME:IDX<|tool_call_argument_begin|>: the id is kept, the name is between the last '.' and ':' of
    // its first part (vLLM reads "NAME:IDX" too).
    const size_t arg = body.find(kKimiArgumentBegin);
    if (arg == npos) return Head::more;
    const std::string_view id = trim(body.substr(0, arg));
    if (!kimi_id(id, head.name)) return Head::broken;
    head.id = std::string(id);
    return object_start(body, arg + kKimiArgumentBegin.size(), head);
  }
  const size_t sep = body.find(kDeepSeekSep);
  if (sep == npos) return Head::more;
  const size_t after = sep + kDeepSeekSep.size();
  if (f == ToolFormat::deepseek_v31) {  // NAME<｜tool▁sep｜>{...}
    const std::string_view name = trim(body.substr(0, sep));
    if (!plain_name(name)) return Head::broken;
    head.name = std::string(name);
    return object_start(body, after, head);
  }
  // TYPE<｜tool▁sep｜>NAME\n```json\n{...}\n```
  if (!plain_name(trim(body.substr(0, sep)))) return Head::broken;
  const size_t line = body.find('\n', after);
  if (line == npos) return Head::more;
  const std::string_view name = trim(body.substr(after, line - after));
  if (!plain_name(name)) return Head::broken;
  const size_t fence = body.find_first_not_of(" \t\r\n", line + 1);
  if (fence == npos) return Head::more;
  const std::string_view rest = body.substr(fence);
  if (!rest.starts_with("```")) return std::string_view("```").starts_with(rest) ? Head::more : Head::broken;
  const size_t fence_line = rest.find('\n');
  if (fence_line == npos) return Head::more;
  const std::string_view lang = trim(rest.substr(3, fence_line - 3));
  if (!lang.empty() && lang != "json") return Head::broken;
  head.name = std::string(name);
  return object_start(body, fence + fence_line + 1, head);
}

// A whole call block: its head and then one JSON object (DeepSeek-V3's closing fence, which may be missing where the
// answer was cut after the object, left out).
bool read_call(ToolFormat f, std::string_view body, ToolCall& call) {
  CallHead head;
  if (read_head(f, body, head) != Head::whole) return false;
  std::string_view rest = body.substr(head.args);
  if (f == ToolFormat::deepseek_v3)
    if (const size_t fence = rest.rfind("```"); fence != npos && all_space(rest.substr(fence + 3)))
      rest = rest.substr(0, fence);
  if (!arguments_object(trim(rest), call.arguments)) return false;
  call.name = std::move(head.name);
  call.id = f == ToolFormat::kimi_k2 ? std::move(head.id) : new_tool_call_id(f);
  return true;
}

}  // namespace

ParsedAnswer parse_deepseek_v3_tool_calls(std::string_view text) {
  return parse_section(text, kDeepSeek, [](std::string_view body, ToolCall& c) {
    return read_call(ToolFormat::deepseek_v3, body, c);
  });
}

ParsedAnswer parse_deepseek_v31_tool_calls(std::string_view text) {
  return parse_section(text, kDeepSeek, [](std::string_view body, ToolCall& c) {
    return read_call(ToolFormat::deepseek_v31, body, c);
  });
}

ParsedAnswer parse_kimi_k2_tool_calls(std::string_view text) {
  return parse_section(text, kKimi, [](std::string_view body, ToolCall& c) {
    return read_call(ToolFormat::kimi_k2, body, c);
  });
}

namespace {

// The earliest of `markers` at or after `from` (npos when none).
size_t earliest(std::string_view text, std::initializer_list<std::string_view> markers, size_t from) {
  size_t best = npos;
  for (std::string_view m : markers) best = std::min(best, text.find(m, from));
  return best;
}

// Where a search that found none of `markers` in `text` may resume: a marker cut by the text's end would begin in the
// last (longest - 1) bytes.
size_t resume_after(std::string_view text, std::initializer_list<std::string_view> markers, size_t from) {
  size_t longest = 0;
  for (std::string_view m : markers) longest = std::max(longest, m.size());
  return std::max(from, text.size() >= longest ? text.size() - longest + 1 : 0);
}

}  // namespace

void SectionCallStream::arguments(std::string_view text, size_t block_end, std::vector<Delta>& out) {
  const size_t object_end = object_.advance(text.substr(args_, block_end - args_));
  const size_t end = object_end == JsonValueEnd::npos ? block_end : args_ + object_end;
  if (end <= sent_) return;
  if (out.empty() || out.back().index != calls_ - 1) out.push_back({calls_ - 1, false, "", "", ""});
  out.back().arguments += text.substr(sent_, end - sent_);
  sent_ = end;
}

void SectionCallStream::kimi_head(std::string_view block, std::vector<Delta>& out) {
  if (head_ == HeadState::more) {
    if (id_begin_ == npos) {
      const size_t b = block.find_first_not_of(" \t\r\n", scan_);
      scan_ = b == npos ? block.size() : b;
      if (b == npos) return;
      id_begin_ = b;
    }
    // The id ends at a space or at the '<' of <|tool_call_argument_begin|> (neither can be part of it).
    const size_t end = block.find_first_of(" \t\r\n<", scan_);
    if (end == npos) {
      scan_ = block.size();
      return;
    }
    const std::string_view id = block.substr(id_begin_, end - id_begin_);
    std::string name;
    if (!kimi_id(id, name)) {  // never announced, as the whole answer reads it: content
      head_ = HeadState::broken;
      return;
    }
    out.push_back({calls_++, true, std::move(name), std::string(id), ""});
    head_ = HeadState::named;
    scan_ = end;
  }
  // Announced: spaces, the argument marker, spaces, the object's '{'.
  for (;;) {
    const size_t i = block.find_first_not_of(" \t\r\n", scan_);
    if (i == npos) {
      scan_ = block.size();
      return;
    }
    scan_ = i;
    const std::string_view rest = block.substr(i);
    if (!after_marker_) {
      if (rest.starts_with(kKimiArgumentBegin)) {
        after_marker_ = true;
        scan_ = i + kKimiArgumentBegin.size();
        continue;
      }
      if (kKimiArgumentBegin.starts_with(rest)) return;  // the marker, cut by the text's end
    } else if (rest[0] == '{') {
      head_ = HeadState::whole;
      args_ = sent_ = body_ + i;
      return;
    }
    done_ = true;  // announced, then broken: the whole answer's reading has the last word
    return;
  }
}

std::vector<SectionCallStream::Delta> SectionCallStream::feed(std::string_view text) {
  const Markers& m = f_ == ToolFormat::kimi_k2 ? kKimi : kDeepSeek;
  std::vector<Delta> out;
  while (!done_) {
    if (!in_section_) {
      const size_t at = text.find(m.section_begin, pos_);
      if (at == npos) {
        pos_ = resume_after(text, {m.section_begin}, pos_);
        return out;
      }
      in_section_ = true;
      pos_ = at + m.section_begin.size();
    }
    if (!in_block_) {
      const size_t call = text.find(m.call_begin, pos_), section_end = text.find(m.section_end, pos_);
      if (section_end < call) {  // the section's end: what follows is content (the whole answer's reading)
        done_ = true;
        return out;
      }
      if (call == npos) {
        pos_ = resume_after(text, {m.call_begin, m.section_end}, pos_);
        return out;
      }
      in_block_ = true;
      body_ = searched_ = call + m.call_begin.size();
      head_ = HeadState::more;
      scan_ = 0;
      id_begin_ = npos;
      after_marker_ = false;
      object_.reset();
    }
    // A block ends at its end marker, or where the next block or the section's end begins.
    const size_t limit = earliest(text, {m.call_end, m.call_begin, m.section_end}, searched_);
    const size_t block_end = limit == npos ? text.size() : limit;
    searched_ = limit == npos ? resume_after(text, {m.call_end, m.call_begin, m.section_end}, searched_) : limit;
    const std::string_view block = text.substr(body_, block_end - body_);
    if (f_ == ToolFormat::kimi_k2) {
      if (head_ == HeadState::more || head_ == HeadState::named) kimi_head(block, out);
      if (done_) return out;
    } else if (head_ == HeadState::more) {
      CallHead h;
      const Head r = read_head(f_, block, h);
      if (r == Head::whole) {
        head_ = HeadState::whole;
        args_ = sent_ = body_ + h.args;
        out.push_back({calls_++, true, std::move(h.name), f_ == ToolFormat::kimi_k2 ? std::move(h.id) : "", ""});
      } else if (r == Head::broken) {
        head_ = HeadState::broken;
      }
    }
    if (head_ == HeadState::whole) arguments(text, block_end, out);
    if (limit == npos) return out;
    // Closed: read as the whole answer reads it. A call went out whole already (its head was read on this same
    // block, its object's text is its arguments); one announced and then broken ends the streaming.
    ToolCall c;
    if ((head_ == HeadState::whole && !read_call(f_, block, c)) || head_ == HeadState::named) done_ = true;
    in_block_ = false;
    pos_ = text.substr(limit).starts_with(m.call_end) ? limit + m.call_end.size() : limit;
  }
  return out;
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

}  // namespace attnzoo::answers
