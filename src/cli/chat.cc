// attnzoo chat: an interactive conversation with a checkpoint in its own chat template. Each answer streams token
// by token and ends at EOS or the template's end-of-turn token; the history is re-rendered every turn.
// /reset clears the history, /exit or end of input quits; Ctrl-C stops the answer being written, and Ctrl-C
// twice at the prompt quits. With --reasoning-parser (serve's flag) a reasoning model's thinking is told apart
// from its answer: dimmed on a terminal, or left out with --hide-thinking. gpt-oss's harmony template is read by
// channel without the flag (analysis as the thinking, final as the answer).
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include <unistd.h>

#include "answers/harmony.h"
#include "answers/reasoning.h"
#include "answers/tool_calls.h"
#include "cli/answer_printer.h"
#include "cli/commands.h"
#include "cli/generation_flags.h"
#include "cli/speculative_flags.h"
#include "cli/usage.h"
#include "core/error.h"
#include "engine/chat_turns.h"
#include "engine/draft_proposer.h"
#include "engine/generate.h"
#include "engine/model_adapters.h"
#include "engine/stop.h"
#include "loader/config.h"
#include "loader/model_dir.h"
#include "loader/text_file.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace attnzoo::cli {
namespace {

volatile std::sig_atomic_t g_interrupts = 0;
void on_interrupt(int) { g_interrupts = g_interrupts + 1; }

// Installs the Ctrl-C handler without SA_RESTART, so a blocked read returns and the prompt can react.
class InterruptHandler {
 public:
  InterruptHandler() {
    struct sigaction sa {};
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;
    sigaction(SIGINT, &sa, &previous_);
  }
  ~InterruptHandler() { sigaction(SIGINT, &previous_, nullptr); }

 private:
  struct sigaction previous_ {};
};

enum class Input { line, end, interrupted };

Input read_line(std::string& line) {
  line.clear();
  for (;;) {
    char c;
    const ssize_t n = ::read(STDIN_FILENO, &c, 1);
    if (n == 1) {
      if (c == '\n') return Input::line;
      line += c;
      continue;
    }
    if (n == 0) return line.empty() ? Input::end : Input::line;
    if (errno == EINTR) {
      if (g_interrupts) return Input::interrupted;
      continue;
    }
    return Input::end;
  }
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

std::string usage() {
  return std::string("usage: attnzoo chat [-m MODEL] [--system TEXT] "
                     "[--reasoning-parser qwen3|deepseek_r1|openai_gptoss] [--hide-thinking] ") +
         kGenerationFlagsUsage + "\n         " +
         kSpeculativeFlagsUsage + "\n  /reset clears the history, /exit or Ctrl-D quits, Ctrl-C stops an answer (twice at the prompt: quits)\n";
}

}  // namespace

int run_chat(const std::vector<std::string>& args) {
  GenerationFlags flags;
  flags.max_new_tokens = 512;
  std::string system;
  SpeculativeOptions speculative;
  bool speculative_flags = false;
  answers::ReasoningParser reasoning = answers::ReasoningParser::none;
  bool hide_thinking = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (parse_generation_flag(args, i, flags)) continue;
    if (parse_speculative_flag(args, i, speculative)) {
      speculative_flags = true;
      continue;
    }
    if (args[i] == "--system") {
      if (i + 1 >= args.size()) throw ArgumentError("--system: needs a value");
      system = args[++i];
    } else if (args[i] == "--reasoning-parser") {
      if (i + 1 >= args.size()) throw ArgumentError("--reasoning-parser: needs a value");
      reasoning = answers::parse_reasoning_parser(args[++i]);
    } else if (args[i] == "--hide-thinking") {
      hide_thinking = true;
    } else if (is_help(args[i])) throw HelpRequested(usage());
    else throw_unknown_option("chat", args[i], usage());
  }
  require_utf8(system, "--system");
  use_default_model(flags, "chat");
  find_model_gguf(flags.model);  // the template is read before the model: a bad path gets Model::load's message
  const auto tokenizer = tok::Tokenizer::load(flags.model);
  const ChatFormat format(flags.model, tokenizer);
  answers::check_reasoning_parser(reasoning, &format, *tokenizer, flags.model);
  // gpt-oss answers in harmony channels whatever the flag: read them, or the markers would be dropped into garbage.
  const bool harmony = answers::reads_harmony(answers::detect_tool_format(format.source()), reasoning);
  if (hide_thinking && reasoning == answers::ReasoningParser::none && !harmony)
    throw ArgumentError("--hide-thinking: needs --reasoning-parser qwen3|deepseek_r1 (or a gpt-oss harmony template) "
                        "to tell the thinking apart");

  GenerationOptions options = generation_options(flags);
  LoadOptions load = load_options(flags);
  const auto draft = prepare_speculation(speculative, speculative_flags, load);
  const auto model = Model::load(flags.model, load);
  // One proposer for the whole conversation: a draft model keeps what it computed of the shared history.
  const auto proposer = make_proposer(speculative, draft.get(), model->info().vocab_size);
  options.proposer = proposer.get();
  options.num_speculative_tokens = speculative.num_speculative_tokens;
  // Dim only where a terminal will read the escape codes.
  const bool dim = ::isatty(STDOUT_FILENO);
  options.eos_token_ids = default_eos_ids(flags.model, tokenizer.get(), format.end_of_turn());
  if (harmony)  // <|call|> ends a turn too (gpt-oss lists it as EOS; a checkpoint that does not still stops)
    for (int32_t id : answers::harmony_end_ids(*tokenizer)) options.eos_token_ids.push_back(id);
  options.cancel = [] { return g_interrupts > 0; };

  chat::List start;
  if (!system.empty()) start.push_back(ChatFormat::message("system", system));
  chat::List history = start;
  InterruptHandler interrupts;
  std::fprintf(stderr, "[attnzoo] chat with %s: /reset clears the history, /exit or Ctrl-D quits, Ctrl-C stops an answer\n",
               flags.model.c_str());
  bool warned = false;
  for (;;) {
    std::fputs("> ", stdout);
    std::fflush(stdout);
    g_interrupts = 0;
    std::string line;
    const Input in = read_line(line);
    if (in == Input::interrupted) {
      if (warned) {
        std::fputc('\n', stdout);
        break;
      }
      std::fputs("\n(Ctrl-C again to quit, or /exit)\n", stdout);
      warned = true;
      continue;
    }
    warned = false;
    if (in == Input::end) {
      std::fputc('\n', stdout);
      break;
    }
    line = trim(line);
    if (line.empty()) continue;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      history = start;
      std::fputs("[history cleared]\n", stdout);
      continue;
    }
    try {  // a stray byte (a Latin-1 paste) costs the line, not the conversation
      require_utf8(line, "that line");
    } catch (const ArgumentError& e) {
      std::fprintf(stderr, "[attnzoo] %s: skipped\n", e.what());
      continue;
    }
    history.push_back(ChatFormat::message("user", line));
    const std::vector<int32_t> prompt = format.prompt_ids(chat::Value::list(history), true);
    GenerationOptions turn = options;
    turn.min_new_tokens = min_new_tokens(flags, int64_t(prompt.size()));  // min_length counts the whole history
    try {  // the conversation so far must leave room for an answer, as in `generate`
      std::fputs(fit_in_context(flags, "chat", model->info().max_position_embeddings, int64_t(prompt.size()),
                                turn.max_new_tokens).c_str(), stderr);
    } catch (const ArgumentError& e) {
      history.pop_back();
      std::fprintf(stderr, "[attnzoo] %s: /reset clears the history\n", e.what());
      continue;
    }
    ModelSequence sequence(*model);
    TokenizerTextStream text(tokenizer, /*skip_special_tokens=*/!harmony);
    AnswerPrinter printer(harmony, reasoning, hide_thinking, dim);
    const GenerationResult r =
        generate(sequence, prompt, turn, &text, [&](std::string_view piece) { printer.feed(piece); });
    printer.finish(r.reason == StopReason::eos);
    if (r.reason == StopReason::cancelled) std::fputs(" [stopped]", stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    history.push_back(ChatFormat::message("assistant", harmony ? printer.content() : r.text));
  }
  return 0;
}

}  // namespace attnzoo::cli
