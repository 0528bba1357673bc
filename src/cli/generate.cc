// attnzoo generate: stream a continuation of a prompt to stdout; timings to stderr at the end.
// Sampling defaults follow transformers: the checkpoint's generation_config.json (greedy unless it sets
// do_sample), then any flag given here. With --chat the prompt is one user message in the checkpoint's chat
// template, and the answer also ends at the template's end-of-turn token; its thinking is told apart as in `attnzoo
// chat` (gpt-oss's harmony channels always, <think> with --reasoning-parser): dimmed on a terminal, or left out with
// --hide-thinking.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include "cli/answer_printer.h"
#include "cli/commands.h"
#include "cli/generation_flags.h"
#include "cli/speculative_flags.h"
#include "cli/usage.h"
#include "core/error.h"
#include "core/threads.h"
#include "engine/chat_turns.h"
#include "engine/draft_proposer.h"
#include "engine/generate.h"
#include "engine/model_adapters.h"
#include "engine/stop.h"
#include "loader/config.h"
#include "loader/model_dir.h"
#include "loader/text_file.h"
#include "models/model.h"
#include "answers/harmony.h"
#include "answers/reasoning.h"
#include "answers/tool_calls.h"
#include "tokenizer/tokenizer.h"

namespace attnzoo::cli {
namespace {

struct GenerateArgs {
  GenerationFlags flags;
  std::string prompt, system;
  std::string prompt_source = "-p";  // what the prompt's errors name
  bool have_prompt = false;
  bool add_special = true;
  bool chat = false;
  answers::ReasoningParser reasoning = answers::ReasoningParser::none;
  bool hide_thinking = false;
  SpeculativeOptions speculative;
  bool speculative_flags = false;
};

std::string usage() {
  return std::string("usage: attnzoo generate [-m MODEL] (-p TEXT | -p - (stdin) | -f FILE) [--chat [--system TEXT]\n"
                     "         [--reasoning-parser qwen3|deepseek_r1|openai_gptoss] [--hide-thinking]]\n"
                     "         [--no-special] ") +
         kGenerationFlagsUsage + "\n         " + kSpeculativeFlagsUsage + "\n";
}

GenerateArgs parse_args(const std::vector<std::string>& args) {
  GenerateArgs a;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& s = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw ArgumentError(s + ": needs a value");
      return args[++i];
    };
    if (parse_generation_flag(args, i, a.flags)) continue;
    if (parse_speculative_flag(args, i, a.speculative)) {
      a.speculative_flags = true;
      continue;
    }
    if (s == "-p" || s == "--prompt") {
      a.prompt_source = value() == "-" ? "-p -: stdin" : "-p";
      a.prompt = args[i] == "-" ? read_text_stream(stdin, a.prompt_source) : args[i];
      a.have_prompt = true;
    }
    else if (s == "--no-special") a.add_special = false;
    else if (s == "--chat") a.chat = true;
    else if (s == "--system") a.system = value();
    else if (s == "--reasoning-parser") a.reasoning = answers::parse_reasoning_parser(value());
    else if (s == "--hide-thinking") a.hide_thinking = true;
    else if (s == "-f" || s == "--file") {
      a.prompt = read_text_file("-f", value());
      a.prompt_source = "-f: '" + args[i] + "'";
      a.have_prompt = true;
    }
    else if (is_help(s)) throw HelpRequested(usage());
    else throw_unknown_option("generate", s, usage());
  }
  use_default_model(a.flags, "generate");
  if (!a.have_prompt) throw ArgumentError("generate: -p TEXT is required\n" + usage());
  require_utf8(a.prompt, a.prompt_source);
  require_utf8(a.system, "--system");
  if (!a.system.empty() && !a.chat) throw ArgumentError("generate: --system needs --chat");
  if (a.reasoning != answers::ReasoningParser::none && !a.chat)
    throw ArgumentError("generate: --reasoning-parser needs --chat");
  if (a.hide_thinking && !a.chat) throw ArgumentError("generate: --hide-thinking needs --chat");
  return a;
}

// SIGINT / SIGTERM end generation between tokens (the summary still prints); a signal during the prompt's
// forward pass cancels its kernels between tasks. The handler only stores the signal number.
std::atomic<int> g_signal{0};
extern "C" void on_stop_signal(int sig) { g_signal.store(sig); }

bool stop_requested() { return g_signal.load() != 0; }

}  // namespace

int run_generate(const std::vector<std::string>& args) {
  const GenerateArgs a = parse_args(args);
  GenerationOptions options = generation_options(a.flags);

  LoadOptions load = load_options(a.flags);
  const auto draft = prepare_speculation(a.speculative, a.speculative_flags, load);
  const auto model = Model::load(a.flags.model, load);
  const auto proposer = make_proposer(a.speculative, draft.get(), model->info().vocab_size);
  options.proposer = proposer.get();
  options.num_speculative_tokens = a.speculative.num_speculative_tokens;
  const auto tokenizer = tok::Tokenizer::load(a.flags.model);
  options.eos_token_ids = default_eos_ids(a.flags.model, tokenizer.get());

  std::vector<int32_t> prompt;
  bool harmony = false;
  if (a.chat) {
    const ChatFormat format(a.flags.model, tokenizer);
    answers::check_reasoning_parser(a.reasoning, &format, *tokenizer, a.flags.model);
    // gpt-oss answers in harmony channels whatever the flag: read them, or the markers would be dropped and the
    // analysis run into the answer.
    harmony = answers::reads_harmony(answers::detect_tool_format(format.source()), a.reasoning);
    if (a.hide_thinking && a.reasoning == answers::ReasoningParser::none && !harmony)
      throw ArgumentError("--hide-thinking: needs --reasoning-parser qwen3|deepseek_r1 (or a gpt-oss harmony "
                          "template) to tell the thinking apart");
    chat::List messages;
    if (!a.system.empty()) messages.push_back(ChatFormat::message("system", a.system));
    messages.push_back(ChatFormat::message("user", a.prompt));
    prompt = format.prompt_ids(chat::Value::list(std::move(messages)), true);
    options.eos_token_ids = default_eos_ids(a.flags.model, tokenizer.get(), format.end_of_turn());
    if (harmony)  // <|call|> ends a turn too (gpt-oss lists it as EOS; a checkpoint that does not still stops)
      for (int32_t id : answers::harmony_end_ids(*tokenizer)) options.eos_token_ids.push_back(id);
  } else {
    prompt = tokenizer->encode(a.prompt, a.add_special);
  }
  options.min_new_tokens = min_new_tokens(a.flags, int64_t(prompt.size()));
  // Never a silent run past the positions the model was trained for: a prompt that does not fit is an error; a
  // generation that would overrun is shortened, and says so.
  const std::string notice = fit_in_context(a.flags, "generate", model->info().max_position_embeddings,
                                            int64_t(prompt.size()), options.max_new_tokens);
  std::fputs(notice.c_str(), stderr);
  ModelSequence sequence(*model);
  TokenizerTextStream text(tokenizer, /*skip_special_tokens=*/!harmony);
  AnswerPrinter printer(harmony, a.reasoning, a.hide_thinking, ::isatty(STDOUT_FILENO));
  options.cancel = stop_requested;
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  GenerationResult r;
  try {
    ThreadPool::InterruptScope cancel(stop_requested);
    r = generate(sequence, prompt, options, &text, [&](std::string_view piece) { printer.feed(piece); });
  } catch (const Interrupted&) {
    r.reason = StopReason::cancelled;  // during the prompt's forward pass: nothing generated
    r.prompt_tokens = int64_t(prompt.size());
  }
  printer.finish(r.reason == StopReason::eos);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  std::fputc('\n', stdout);
  std::fflush(stdout);

  const double prefill_rate = r.prefill_seconds > 0 ? double(r.prompt_tokens) / r.prefill_seconds : 0.0;
  // Tokens after the first per second of decoding (with speculation a pass yields several).
  const double decode_rate =
      r.decode_seconds > 0 && !r.tokens.empty() ? double(r.tokens.size() - 1) / r.decode_seconds : 0.0;
  // Only the settings that shaped the output: a greedy run has no top_k / top_p / min_p / seed to report.
  const SamplingParams& sp = options.sampling;
  char sampling[160];
  if (sp.greedy())
    std::snprintf(sampling, sizeof sampling, "greedy");
  else
    std::snprintf(sampling, sizeof sampling, "temperature %g top_k %lld top_p %g min_p %g seed %llu", sp.temperature,
                  (long long)sp.top_k, sp.top_p, sp.min_p, (unsigned long long)sp.seed);
  std::fprintf(stderr,
               "\n[attnzoo] prompt %lld tokens, prefill %.3f s (%.1f tok/s); generated %zu tokens, decode %.3f s "
               "(%.1f tok/s); stop: %s; %s\n",
               (long long)r.prompt_tokens, r.prefill_seconds, prefill_rate, r.tokens.size(), r.decode_seconds,
               decode_rate, stop_reason_name(r.reason), sampling);
  if (proposer) {
    const SpeculativeStats& st = r.speculative;
    std::fprintf(stderr, "[attnzoo] speculative %s k %lld: %lld passes, %lld of %lld guesses accepted (%.1f%%), "
                 "mean acceptance length %.2f\n", a.speculative.method == SpeculativeMethod::ngram ? "ngram" : "draft",
                 (long long)a.speculative.num_speculative_tokens, (long long)r.decode_steps,
                 (long long)st.accepted_tokens, (long long)st.draft_tokens, 100.0 * st.acceptance_rate(),
                 st.mean_acceptance_length());
  }
  // The shell's convention for a run ended by a signal: 128 + its number.
  return r.reason == StopReason::cancelled ? 128 + (g_signal.load() ? g_signal.load() : SIGINT) : 0;
}

}  // namespace attnzoo::cli
