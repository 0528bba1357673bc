#pragma once
// Prints a chat answer as it streams, thinking told apart from the answer: `attnzoo chat` and `generate --chat`
// share it so that both show gpt-oss's harmony channels (analysis as the thinking, final as the answer) and a
// <think> model's reasoning the same way: dimmed on a terminal, or left out when hidden.
#include <string>
#include <string_view>

#include "answers/harmony.h"
#include "answers/reasoning.h"

namespace attnzoo::cli {

class AnswerPrinter {
 public:
  // `harmony`: the answer is read by channel (its text must keep special tokens); else `parser` splits <think>.
  AnswerPrinter(bool harmony, answers::ReasoningParser parser, bool hide_thinking, bool dim);
  void feed(std::string_view piece);
  // `stopped`: the answer ended at an end-of-turn token, not cut by max_tokens.
  void finish(bool stopped);
  // The answer without its thinking (harmony: the content, which is what the next turn's template takes).
  const std::string& content() const { return content_; }

 private:
  void show(const std::string& reasoning, const std::string& content);

  bool harmony_, hide_thinking_, dim_;
  answers::ReasoningStream split_;
  answers::HarmonyReader channels_{/*read_calls=*/false};  // no tools are offered: a call's body is shown as text
  std::string content_;
};

}  // namespace attnzoo::cli
