#include "answers/reasoning.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "answers/harmony.h"
#include "core/error.h"
#include "engine/chat_turns.h"
#include "engine/stop.h"
#include "tokenizer/tokenizer.h"

namespace attnzoo::answers {

ReasoningParser parse_reasoning_parser(std::string_view name) {
  if (name == "qwen3") return ReasoningParser::qwen3;
  if (name == "deepseek_r1") return ReasoningParser::deepseek_r1;
  if (name == "openai_gptoss") return ReasoningParser::openai_gptoss;
  throw ArgumentError("--reasoning-parser: must be qwen3, deepseek_r1 or openai_gptoss, got \"" + std::string(name) +
                      "\"");
}

const char* reasoning_parser_name(ReasoningParser p) {
  switch (p) {
    case ReasoningParser::qwen3: return "qwen3";
    case ReasoningParser::deepseek_r1: return "deepseek_r1";
    case ReasoningParser::openai_gptoss: return "openai_gptoss";
    case ReasoningParser::none: break;
  }
  return "none";
}

bool knows_reasoning_tag(ReasoningParser p, std::string_view template_source, const tok::Tokenizer& tokenizer) {
  const std::string_view tag = p == ReasoningParser::openai_gptoss ? kHarmonyChannel : kThinkClose;
  return template_source.find(tag) != std::string_view::npos || tokenizer.encode(std::string(tag), false).size() == 1;
}

void check_reasoning_parser(ReasoningParser p, const ChatFormat* chat, const tok::Tokenizer& tokenizer,
                            const std::string& model) {
  if (p == ReasoningParser::none) return;
  const std::string name = reasoning_parser_name(p);
  if (!chat)
    throw ArgumentError("--reasoning-parser " + name + ": " + model + " has no chat template, and reasoning is only "
                        "read from chat answers");
  const std::string_view tag = p == ReasoningParser::openai_gptoss ? kHarmonyChannel : kThinkClose;
  if (!knows_reasoning_tag(p, chat->source(), tokenizer))
    throw ArgumentError("--reasoning-parser " + name + ": " + model + " knows no " + std::string(tag) +
                        " (neither its chat template nor its vocabulary has it), so its answers have no reasoning " +
                        (p == ReasoningParser::openai_gptoss ? "channel" : "block") + " to separate");
}

ReasoningStream::ReasoningStream(ReasoningParser parser)
    : parser_(parser),
      state_(parser == ReasoningParser::deepseek_r1 ? State::reasoning
             : parser == ReasoningParser::qwen3    ? State::content_before
                                                   : State::content_after),
      // qwen3 keeps a second <think> inside the block as reasoning text, as vLLM's partition does.
      open_dropped_(parser != ReasoningParser::deepseek_r1) {}

ReasoningStream::Piece ReasoningStream::feed(std::string_view text) {
  Piece out;
  held_ += text;
  for (;;) {
    if (state_ == State::content_after) {
      out.content += held_;
      held_.clear();
      return out;
    }
    if (state_ == State::content_before) {
      const size_t open = held_.find(kThinkOpen);
      if (open != std::string::npos) {
        out.content += held_.substr(0, open);
        held_.erase(0, open + kThinkOpen.size());
        state_ = State::reasoning;
        continue;
      }
      const size_t keep = tag_overlap(held_, kThinkOpen);
      out.content += held_.substr(0, held_.size() - keep);
      held_.erase(0, held_.size() - keep);
      return out;
    }
    // Reasoning: up to </think>; deepseek_r1 also drops a <think> the model writes before it.
    const size_t close = held_.find(kThinkClose);
    if (!open_dropped_) {
      const size_t open = held_.find(kThinkOpen);
      if (open != std::string::npos && (close == std::string::npos || open < close)) {
        out.reasoning += held_.substr(0, open);
        held_.erase(0, open + kThinkOpen.size());
        open_dropped_ = true;
        continue;
      }
    }
    if (close != std::string::npos) {
      out.reasoning += held_.substr(0, close);
      held_.erase(0, close + kThinkClose.size());
      state_ = State::content_after;
      open_dropped_ = true;
      continue;
    }
    size_t keep = tag_overlap(held_, kThinkClose);
    if (!open_dropped_) keep = std::max(keep, tag_overlap(held_, kThinkOpen));
    out.reasoning += held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
  }
}

ReasoningStream::Piece ReasoningStream::finish() {
  Piece out;
  (state_ == State::reasoning ? out.reasoning : out.content) = std::move(held_);
  held_.clear();
  return out;
}

ReasoningSplit split_reasoning(std::string_view text, ReasoningParser parser) {
  ReasoningSplit out;
  // openai_gptoss is read by answers/harmony.h, channel by channel; text reaching this split is plain content.
  if (parser == ReasoningParser::none || parser == ReasoningParser::openai_gptoss) {
    out.content = std::string(text);
    return out;
  }
  ReasoningStream s(parser);
  ReasoningStream::Piece a = s.feed(text);
  const bool closed = s.closed();
  ReasoningStream::Piece b = s.finish();
  if (parser == ReasoningParser::qwen3 && !closed) {
    out.content = std::string(text);  // no complete <think>...</think>: all of it is the answer
    return out;
  }
  out.has_reasoning = true;
  out.reasoning = a.reasoning + b.reasoning;
  out.content = a.content + b.content;
  return out;
}

}  // namespace attnzoo::answers
