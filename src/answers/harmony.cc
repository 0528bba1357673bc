#include "answers/harmony.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <span>

#include "engine/stop.h"
#include "tokenizer/tokenizer.h"

namespace attnzoo::answers {
namespace {

constexpr std::array<std::string_view, 4> kBodyEnds = {kHarmonyEnd, kHarmonyReturn, kHarmonyCall, kHarmonyStart};
constexpr std::string_view kFunctions = "functions.";

bool all_space(std::string_view s) { return s.find_first_not_of(" \t\r\n") == std::string_view::npos; }

// The earliest of `markers` in `s`: its position and length (npos when none is there).
std::pair<size_t, size_t> earliest(std::string_view s, std::span<const std::string_view> markers) {
  std::pair<size_t, size_t> best{std::string_view::npos, 0};
  for (std::string_view m : markers)
    if (const size_t at = s.find(m); at < best.first) best = {at, m.size()};
  return best;
}

struct Header {
  std::string role = "assistant", channel, recipient, content_type;
};

// "[role] [to=R] <|channel|>C [to=R] [<|constrain|>]T": words end at whitespace or at the next marker.
Header parse_header(std::string_view h, bool has_role) {
  Header out;
  enum class Next { role, word, channel, content_type } next = has_role ? Next::role : Next::word;
  size_t i = 0;
  while (i < h.size()) {
    if (h.substr(i).starts_with(kHarmonyChannel)) {
      i += kHarmonyChannel.size();
      next = Next::channel;
      continue;
    }
    if (h.substr(i).starts_with(kHarmonyConstrain)) {
      i += kHarmonyConstrain.size();
      next = Next::content_type;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(h[i]))) {
      ++i;
      continue;
    }
    if (h.substr(i).starts_with("<|")) {  // another marker: no part of the header's words
      const size_t close = h.find("|>", i + 2);
      i = close == std::string_view::npos ? h.size() : close + 2;
      continue;
    }
    size_t end = i;
    while (end < h.size() && !std::isspace(static_cast<unsigned char>(h[end])) && !h.substr(end).starts_with("<|"))
      ++end;
    const std::string_view word = h.substr(i, end - i);
    i = end;
    if (next == Next::role) out.role = word;
    else if (word.starts_with("to=")) out.recipient = word.substr(3);
    else if (next == Next::channel) out.channel = word;
    else if (next == Next::content_type || out.content_type.empty()) out.content_type = word;
    next = Next::word;
  }
  return out;
}

}  // namespace

std::vector<int32_t> harmony_end_ids(const tok::Tokenizer& tokenizer) {
  std::vector<int32_t> out;
  for (std::string_view end : {kHarmonyReturn, kHarmonyCall}) {
    const std::vector<int32_t> ids = tokenizer.encode(end, false);
    if (ids.size() == 1 && tokenizer.is_special(ids[0])) out.push_back(ids[0]);
  }
  return out;
}

std::string harmony_call_header(std::string_view function_name) {
  return "<|channel|>commentary to=functions." + std::string(function_name) + " <|constrain|>json<|message|>";
}

void HarmonyReader::stray_text(std::string_view text, Piece& out) {
  // Words outside any message are kept as content; a header cut short or left without a body is not.
  if (all_space(text) || text.find("<|") != std::string_view::npos) return;
  if (content_messages_++ > 0) out.content += '\n';
  out.content += text;
}

void HarmonyReader::open_message(std::string_view header_text, Piece& out) {
  const Header h = parse_header(header_text, has_role_);
  in_body_ = true;
  const bool function = h.recipient.starts_with(kFunctions) && h.recipient.size() > kFunctions.size();
  if (h.role != "assistant") kind_ = Kind::drop;
  else if (function && read_calls_) kind_ = Kind::call;
  else if (h.channel == "analysis") kind_ = Kind::reasoning;
  else if (!h.recipient.empty() && !function) kind_ = Kind::drop;
  else kind_ = Kind::content;
  if (kind_ == Kind::reasoning && reasoning_messages_++ > 0) out.reasoning += '\n';
  if (kind_ == Kind::content && content_messages_++ > 0) out.content += '\n';
  if (kind_ == Kind::call) {
    call_name_ = h.recipient.substr(kFunctions.size());
    call_body_.clear();
    call_sent_ = parallel_ || announced_ == 0;
    if (call_sent_) {
      call_id_ = new_tool_call_id();
      out.calls.push_back({announced_++, true, call_id_, call_name_, ""});
    }
  }
}

void HarmonyReader::body_text(std::string_view text, Piece& out) {
  switch (kind_) {
    case Kind::reasoning: out.reasoning += text; break;
    case Kind::content: out.content += text; break;
    case Kind::call:
      call_body_ += text;
      if (call_sent_ && !text.empty()) {
        if (out.calls.empty() || out.calls.back().index != announced_ - 1)
          out.calls.push_back({announced_ - 1, false, "", "", ""});
        out.calls.back().arguments += text;
      }
      break;
    case Kind::drop: break;
  }
}

void HarmonyReader::close_message(bool whole, Piece& out) {
  in_body_ = false;
  has_role_ = false;
  if (kind_ != Kind::call) return;
  if (!whole) {  // cut by max_tokens: no call, what was read of it is content
    if (content_messages_++ > 0) out.content += '\n';
    out.content += call_body_;
    return;
  }
  if (!call_sent_) return;
  ToolCall call;
  call.id = call_id_;
  call.name = call_name_;
  call.arguments = call_body_;
  calls_.push_back(std::move(call));
}

HarmonyReader::Piece HarmonyReader::feed(std::string_view text) {
  Piece out;
  held_ += text;
  for (;;) {
    if (!in_body_) {
      // A header: held whole until its <|message|> says what the body is.
      static constexpr std::array<std::string_view, 5> kHeaderMarks = {kHarmonyStart, kHarmonyMessage, kHarmonyEnd,
                                                                       kHarmonyReturn, kHarmonyCall};
      const auto [at, len] = earliest(held_, kHeaderMarks);
      if (at == std::string::npos) return out;
      const std::string_view mark = std::string_view(held_).substr(at, len);
      const bool message = mark == kHarmonyMessage, start = mark == kHarmonyStart;
      const std::string before = held_.substr(0, at);
      held_.erase(0, at + len);
      if (message) {
        open_message(before, out);
      } else {
        if (!has_role_) stray_text(before, out);  // after <|start|>, a header without a body is dropped
        has_role_ = start;
      }
      continue;
    }
    const auto [at, len] = earliest(held_, kBodyEnds);
    if (at == std::string::npos) {
      size_t keep = 0;
      for (std::string_view m : kBodyEnds) keep = std::max(keep, tag_overlap(held_, m));
      body_text(std::string_view(held_).substr(0, held_.size() - keep), out);
      held_.erase(0, held_.size() - keep);
      return out;
    }
    const bool start = std::string_view(held_).substr(at, len) == kHarmonyStart;
    body_text(std::string_view(held_).substr(0, at), out);
    held_.erase(0, at + len);
    close_message(true, out);
    has_role_ = start;
  }
}

HarmonyReader::Piece HarmonyReader::finish(bool stopped) {
  Piece out;
  if (in_body_) {
    body_text(held_, out);
    close_message(stopped, out);
  } else if (!has_role_) {
    stray_text(held_, out);
  }
  held_.clear();
  return out;
}

HarmonyAnswer read_harmony(std::string_view text, bool stopped, bool read_calls, bool parallel) {
  HarmonyReader reader(read_calls, parallel);
  HarmonyReader::Piece a = reader.feed(text);
  HarmonyReader::Piece b = reader.finish(stopped);
  HarmonyAnswer out;
  out.has_reasoning = reader.has_reasoning();
  out.reasoning = a.reasoning + b.reasoning;
  out.content = a.content + b.content;
  out.calls = reader.calls();
  return out;
}

}  // namespace attnzoo::answers
