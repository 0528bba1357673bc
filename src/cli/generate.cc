// attnzoo generate: stream a continuation of a prompt to stdout; timings to stderr at the end.
// Sampling defaults follow transformers: the checkpoint's generation_config.json (greedy unless it sets
// do_sample), then any flag given here. With --chat the prompt is one user message in the checkpoint's chat
// template, and the answer also ends at the template's end-of-turn token.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/generation_flags.h"
#include "core/error.h"
#include "core/threads.h"
#include "engine/chat_turns.h"
#include "engine/generate.h"
#include "engine/model_adapters.h"
#include "loader/config.h"
#include "loader/model_dir.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace attnzoo::cli {
namespace {

struct GenerateArgs {
  GenerationFlags flags;
  std::string prompt, system;
  bool have_prompt = false;
  bool add_special = true;
  bool chat = false;
};

std::string usage() {
  return std::string("usage: attnzoo generate -m DIR -p TEXT [--chat [--system TEXT]] [--no-special]\n         ") +
         kGenerationFlagsUsage + "\n";
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
    if (s == "-p" || s == "--prompt") a.prompt = value(), a.have_prompt = true;
    else if (s == "--no-special") a.add_special = false;
    else if (s == "--chat") a.chat = true;
    else if (s == "--system") a.system = value();
    else if (s == "-h" || s == "--help") throw ArgumentError("generate: help requested\n" + usage());
    else throw ArgumentError("generate: unknown option '" + s + "'\n" + usage());
  }
  if (a.flags.model.empty()) throw ArgumentError("generate: -m DIR is required\n" + usage());
  if (!a.have_prompt) throw ArgumentError("generate: -p TEXT is required\n" + usage());
  if (!a.system.empty() && !a.chat) throw ArgumentError("generate: --system needs --chat");
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

  const Config config = ModelFiles::read_config(a.flags.model);
  const auto model = Model::load(a.flags.model, parse_load_dtype(a.flags.dtype, config));
  const auto tokenizer = tok::Tokenizer::load(a.flags.model);
  if (options.eos_token_ids.empty()) options.eos_token_ids = tokenizer->eos_token_ids();

  std::vector<int32_t> prompt;
  if (a.chat) {
    const ChatFormat format(a.flags.model, tokenizer);
    chat::List messages;
    if (!a.system.empty()) messages.push_back(ChatFormat::message("system", a.system));
    messages.push_back(ChatFormat::message("user", a.prompt));
    prompt = format.prompt_ids(chat::Value::list(std::move(messages)), true);
    for (int32_t id : format.end_of_turn()) options.eos_token_ids.push_back(id);
  } else {
    prompt = tokenizer->encode(a.prompt, a.add_special);
  }
  ModelSequence sequence(*model);
  TokenizerTextStream text(tokenizer);
  options.cancel = stop_requested;
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  GenerationResult r;
  try {
    ThreadPool::InterruptScope cancel(stop_requested);
    r = generate(sequence, prompt, options, &text, [](std::string_view piece) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    });
  } catch (const Interrupted&) {
    r.reason = StopReason::cancelled;  // during the prompt's forward pass: nothing generated
    r.prompt_tokens = int64_t(prompt.size());
  }
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  std::fputc('\n', stdout);
  std::fflush(stdout);

  const double prefill_rate = r.prefill_seconds > 0 ? double(r.prompt_tokens) / r.prefill_seconds : 0.0;
  const double decode_rate = r.decode_seconds > 0 ? double(r.decode_steps) / r.decode_seconds : 0.0;
  std::fprintf(stderr,
               "\n[attnzoo] prompt %lld tokens, prefill %.3f s (%.1f tok/s); generated %zu tokens, decode %.3f s "
               "(%.1f tok/s); stop: %s; temperature %g top_k %lld top_p %g min_p %g seed %llu\n",
               (long long)r.prompt_tokens, r.prefill_seconds, prefill_rate, r.tokens.size(), r.decode_seconds,
               decode_rate, stop_reason_name(r.reason), options.sampling.temperature,
               (long long)options.sampling.top_k, options.sampling.top_p, options.sampling.min_p,
               (unsigned long long)options.sampling.seed);
  // The shell's convention for a run ended by a signal: 128 + its number.
  return r.reason == StopReason::cancelled ? 128 + (g_signal.load() ? g_signal.load() : SIGINT) : 0;
}

}  // namespace attnzoo::cli
