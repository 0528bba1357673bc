// attnzoo generate: stream a continuation of a prompt to stdout; timings to stderr at the end.
// Sampling defaults follow transformers: the checkpoint's generation_config.json (greedy unless it sets
// do_sample), then any flag given here.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"
#include "core/threads.h"
#include "engine/generate.h"
#include "engine/model_adapters.h"
#include "engine/stop.h"
#include "layers/matmul_precision.h"
#include "loader/config.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace attnzoo::cli {
namespace {

struct GenerateArgs {
  std::string model, prompt, dtype = "float32";
  bool have_prompt = false;
  int64_t max_new_tokens = 128;
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int64_t> top_k;
  float presence_penalty = 0.f, frequency_penalty = 0.f;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  bool add_special = true;
};

const char* kUsage =
    "usage: attnzoo generate -m DIR -p TEXT [-n 128] [--temperature T] [--top-k K] [--top-p P] [--min-p M]\n"
    "         [--repetition-penalty R] [--presence-penalty X] [--frequency-penalty X] [--seed S]\n"
    "         [--dtype float32|bfloat16|auto] [--matmul-precision highest|medium] [--stop STR]...\n"
    "         [--no-special]\n";

template <typename T>
T parse_number(const std::string& flag, const std::string& v) {
  try {
    size_t used = 0;
    T out;
    if constexpr (std::is_floating_point_v<T>) out = T(std::stod(v, &used));
    // stoull reads "-1" as 2^64 - 1: a sign is refused rather than wrapped.
    else if constexpr (std::is_unsigned_v<T>) out = v.find('-') == std::string::npos ? T(std::stoull(v, &used)) : T(0);
    else out = T(std::stoll(v, &used));
    if (used == v.size()) return out;
  } catch (const std::exception&) {
  }
  if constexpr (std::is_unsigned_v<T>)
    throw ArgumentError(flag + ": expected a non-negative integer, got '" + v + "'");
  throw ArgumentError(flag + ": expected a number, got '" + v + "'");
}

GenerateArgs parse_args(const std::vector<std::string>& args) {
  GenerateArgs a;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& s = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw ArgumentError(s + ": needs a value");
      return args[++i];
    };
    if (s == "-m" || s == "--model") a.model = value();
    else if (s == "-p" || s == "--prompt") a.prompt = value(), a.have_prompt = true;
    else if (s == "-n" || s == "--max-new-tokens") a.max_new_tokens = parse_number<int64_t>(s, value());
    else if (s == "--temperature") a.temperature = parse_number<float>(s, value());
    else if (s == "--top-k") a.top_k = parse_number<int64_t>(s, value());
    else if (s == "--top-p") a.top_p = parse_number<float>(s, value());
    else if (s == "--min-p") a.min_p = parse_number<float>(s, value());
    else if (s == "--repetition-penalty") a.repetition_penalty = parse_number<float>(s, value());
    else if (s == "--presence-penalty") a.presence_penalty = parse_number<float>(s, value());
    else if (s == "--frequency-penalty") a.frequency_penalty = parse_number<float>(s, value());
    else if (s == "--seed") a.seed = parse_number<uint64_t>(s, value());
    else if (s == "--dtype") a.dtype = value();
    else if (s == "--matmul-precision") set_matmul_precision(parse_matmul_precision(value()));
    else if (s == "--stop") a.stop.push_back(value());
    else if (s == "--no-special") a.add_special = false;
    else if (s == "-h" || s == "--help") throw ArgumentError(std::string("generate: help requested\n") + kUsage);
    else throw ArgumentError("generate: unknown option '" + s + "'\n" + kUsage);
  }
  if (a.model.empty()) throw ArgumentError(std::string("generate: -m DIR is required\n") + kUsage);
  if (!a.have_prompt) throw ArgumentError(std::string("generate: -p TEXT is required\n") + kUsage);
  return a;
}

// transformers' defaults: greedy unless generation_config.json sets do_sample; its values seed the flags.
SamplingParams sampling_from(const GenerateArgs& a) {
  SamplingParams p;
  const auto gen_path = std::filesystem::path(a.model) / "generation_config.json";
  bool do_sample = false;
  if (std::filesystem::exists(gen_path)) {
    const Config g = Config::load(gen_path.string());
    do_sample = g.get_bool_or("do_sample", false);
    p.temperature = float(g.get_float_or("temperature", 1.0));
    p.top_k = g.get_int_or("top_k", 50);
    p.top_p = float(g.get_float_or("top_p", 1.0));
    p.min_p = float(g.get_float_or("min_p", 0.0));
    p.repetition_penalty = float(g.get_float_or("repetition_penalty", 1.0));
  }
  if (!do_sample) p.temperature = 0.f;
  if (a.temperature) p.temperature = *a.temperature;
  if (a.top_k) p.top_k = *a.top_k;
  if (a.top_p) p.top_p = *a.top_p;
  if (a.min_p) p.min_p = *a.min_p;
  if (a.repetition_penalty) p.repetition_penalty = *a.repetition_penalty;
  p.presence_penalty = a.presence_penalty;
  p.frequency_penalty = a.frequency_penalty;
  p.seed = a.seed;
  p.validate();
  return p;
}

// SIGINT / SIGTERM end generation between tokens (the summary still prints); a signal during the prompt's
// forward pass cancels its kernels between tasks. The handler only stores the signal number.
std::atomic<int> g_signal{0};
extern "C" void on_stop_signal(int sig) { g_signal.store(sig); }

bool stop_requested() { return g_signal.load() != 0; }

}  // namespace

int run_generate(const std::vector<std::string>& args) {
  const GenerateArgs a = parse_args(args);
  GenerationOptions options;
  options.sampling = sampling_from(a);
  options.max_new_tokens = a.max_new_tokens;
  options.stop = a.stop;

  const Config config = Config::load((std::filesystem::path(a.model) / "config.json").string());
  const auto model = Model::load(a.model, parse_load_dtype(a.dtype, config));
  const auto tokenizer = tok::Tokenizer::load(a.model);
  options.eos_token_ids = load_eos_token_ids(a.model);
  if (options.eos_token_ids.empty()) options.eos_token_ids = tokenizer->eos_token_ids();

  const std::vector<int32_t> prompt = tokenizer->encode(a.prompt, a.add_special);
  ModelSequence sequence(*model);
  TokenizerTextStream text(tokenizer);
  options.interrupted = stop_requested;
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
    r.reason = StopReason::interrupted;  // during the prompt's forward pass: nothing generated
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
  return r.reason == StopReason::interrupted ? 128 + (g_signal.load() ? g_signal.load() : SIGINT) : 0;
}

}  // namespace attnzoo::cli
