#include "cli/answer_printer.h"

#include <cstdio>

namespace attnzoo::cli {

AnswerPrinter::AnswerPrinter(bool harmony, answers::ReasoningParser parser, bool hide_thinking, bool dim)
    : harmony_(harmony), hide_thinking_(hide_thinking), dim_(dim && !hide_thinking),
      split_(harmony ? answers::ReasoningParser::none : parser) {}

void AnswerPrinter::show(const std::string& reasoning, const std::string& content) {
  if (!reasoning.empty() && !hide_thinking_) {
    if (dim_) std::fputs("\x1b[2m", stdout);  // SGR 2 (faint)
    std::fwrite(reasoning.data(), 1, reasoning.size(), stdout);
    if (dim_) std::fputs("\x1b[0m", stdout);
  }
  std::fwrite(content.data(), 1, content.size(), stdout);
  std::fflush(stdout);
  content_ += content;
}

void AnswerPrinter::feed(std::string_view piece) {
  if (harmony_) {
    const auto p = channels_.feed(piece);
    show(p.reasoning, p.content);
  } else {
    const auto p = split_.feed(piece);  // with no parser every piece passes through as content
    show(p.reasoning, p.content);
  }
}

void AnswerPrinter::finish(bool stopped) {
  if (harmony_) {
    const auto p = channels_.finish(stopped);
    show(p.reasoning, p.content);
  } else {
    const auto p = split_.finish();
    show(p.reasoning, p.content);
  }
}

}  // namespace attnzoo::cli
