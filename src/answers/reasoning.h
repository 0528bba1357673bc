#pragma once
// Reasoning models' thinking read out of a chat answer into OpenAI / vLLM's message.reasoning_content, with the
// semantics of vLLM's --reasoning-parser qwen3 / deepseek_r1:
//   qwen3:       the text between <think> and </think> is the reasoning, the rest the content. An answer without
//                both tags is all content (enable_thinking false renders the empty block in the prompt, so the
//                model writes neither).
//   deepseek_r1: the template opened <think> in the prompt, so the text up to </think> is the reasoning (a <think>
//                the model writes itself is dropped), the rest the content; an answer without </think> is all
//                reasoning.
// Where vLLM drops text written before <think>, it is kept here (qwen3: content, deepseek_r1: reasoning), so a
// streamed answer and the whole one split alike; the one difference left is vLLM's too: a qwen3 stream that
// opens <think> and never closes it has sent its reasoning as reasoning, the whole answer calls it content.
#include <string>
#include <string_view>

namespace attnzoo {
class ChatFormat;
namespace tok {
class Tokenizer;
}
}  // namespace attnzoo

namespace attnzoo::answers {

inline constexpr std::string_view kThinkOpen = "<think>";
inline constexpr std::string_view kThinkClose = "</think>";

// openai_gptoss: gpt-oss's harmony channels (analysis is the reasoning), read by answers/harmony.h.
enum class ReasoningParser { none, qwen3, deepseek_r1, openai_gptoss };

// "qwen3" / "deepseek_r1" / "openai_gptoss" (vLLM's names); throws ArgumentError naming --reasoning-parser otherwise.
ReasoningParser parse_reasoning_parser(std::string_view name);
const char* reasoning_parser_name(ReasoningParser p);

// Whether the model can write `p`'s end tag (</think>; openai_gptoss: <|channel|>): its chat template mentions it or
// its vocabulary holds it as one token. Model.chat asks this before reading with `p`.
bool knows_reasoning_tag(ReasoningParser p, std::string_view template_source, const tok::Tokenizer& tokenizer);

// A parser for a model that never writes <think> ... </think> would call every answer reasoning (deepseek_r1) or
// change nothing: throws ArgumentError naming --reasoning-parser unless the chat template or the vocabulary (one
// token) knows </think> (openai_gptoss: <|channel|>). `model`: the directory, for the message.
void check_reasoning_parser(ReasoningParser p, const ChatFormat* chat, const tok::Tokenizer& tokenizer,
                            const std::string& model);

struct ReasoningSplit {
  bool has_reasoning = false;  // false: reasoning_content is null
  std::string reasoning;
  std::string content;
};

ReasoningSplit split_reasoning(std::string_view text, ReasoningParser parser);

// The same split fed a piece at a time: each feed returns what can be sent now, holding back the end of the text
// while it may still be the start of a tag (so a tag cut across two deltas is still seen); finish() sends the rest.
class ReasoningStream {
 public:
  struct Piece {
    std::string reasoning, content;
  };
  explicit ReasoningStream(ReasoningParser parser = ReasoningParser::none);
  Piece feed(std::string_view text);
  Piece finish();
  // Whether </think> came (qwen3: the only way an answer holds reasoning).
  bool closed() const { return state_ == State::content_after; }

 private:
  enum class State { content_before, reasoning, content_after };
  ReasoningParser parser_;
  State state_;
  bool open_dropped_ = false;  // deepseek_r1: the model's own <think> was dropped (or can no longer come)
  std::string held_;
};

}  // namespace attnzoo::answers
