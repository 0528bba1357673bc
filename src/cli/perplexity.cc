// attnzoo perplexity: llama.cpp's perplexity tool (same windows, same scoring, same printout) on any model we
// load. The running estimate after each window goes to stdout as [1]x,[2]y,...; then the final estimate.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/generation_flags.h"
#include "cli/usage.h"
#include "core/error.h"
#include "engine/perplexity.h"
#include "loader/text_file.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace attnzoo::cli {
namespace {

struct PerplexityArgs {
  GenerationFlags flags;
  std::string file;
  PerplexityOptions options;
};

const char* kUsage =
    "usage: attnzoo perplexity [-m MODEL] -f FILE [-c|--ctx-size 512] [-b|--batch-size 2048] [--chunks N]\n"
    "         [--dtype auto|float32|bfloat16] [--matmul-precision auto|highest|medium]\n"
    "         [--batch-invariant]\n"
    "         [--kv-cache-dtype auto|float32|bfloat16|float16|int8|fp8] [--block-size 16] [--kv-cache-memory 4G]\n"
    "         [--device auto|cpu|cuda[:N]] [--gpu-memory-utilization 0.9]\n"
    "  perplexity of the model over FILE as llama.cpp computes it: windows of -c tokens, each from an empty\n"
    "  state (first token BOS when the tokenizer adds one), the second half of each scored; -b tokens per\n"
    "  forward call (several windows side by side); --chunks: score only the first N windows\n";

PerplexityArgs parse_args(const std::vector<std::string>& args) {
  PerplexityArgs a;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& s = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw ArgumentError(s + ": needs a value");
      return args[++i];
    };
    // The model and memory-pool flags generate takes; its sampling flags mean nothing here.
    if (s == "-m" || s == "--model" || s == "--dtype" || s == "--matmul-precision" || s == "--kv-cache-dtype" ||
        s == "--block-size" || s == "--kv-cache-memory" || s == "--batch-invariant" || s == "--device" ||
        s == "--gpu-memory-utilization")
      parse_generation_flag(args, i, a.flags);
    else if (s == "-f" || s == "--file") a.file = value();
    else if (s == "-c" || s == "--ctx-size") a.options.n_ctx = parse_number<int64_t>(s, value());
    else if (s == "-b" || s == "--batch-size") a.options.n_batch = parse_number<int64_t>(s, value());
    else if (s == "--chunks") a.options.n_chunks = parse_number<int64_t>(s, value());
    else if (is_help(s)) throw HelpRequested(kUsage);
    else throw_unknown_option("perplexity", s, kUsage);
  }
  if (a.file.empty()) throw ArgumentError(std::string("perplexity: -f FILE (the text to score) is required\n") + kUsage);
  check_perplexity_options(a.options, /*max_context=*/0);  // before the model loads
  use_default_model(a.flags, "perplexity");
  return a;
}

}  // namespace

int run_perplexity(const std::vector<std::string>& args) {
  PerplexityArgs a = parse_args(args);
  const std::string text = read_text_file("-f", a.file);
  if (text.empty()) throw ArgumentError("-f: '" + a.file + "' is empty: perplexity needs a text to score");
  require_utf8(text, "-f: '" + a.file + "'");
  const auto model = Model::load(a.flags.model, load_options(a.flags));
  check_perplexity_options(a.options, model->info().max_position_embeddings);  // before tokenizing
  std::fprintf(stderr, "perplexity: formats\n%s", describe_formats(model->info().formats, "  ").c_str());
  const auto tokenizer = tok::Tokenizer::load(a.flags.model);
  std::fprintf(stderr, "perplexity: tokenizing the input ..\n");
  PerplexityTokens input = perplexity_tokens(*tokenizer, text);
  a.options.bos = input.bos;
  a.options.source = "-f: " + a.file;
  const int64_t n = int64_t(input.tokens.size()), c = a.options.n_ctx;
  if (n >= 2 * c) {
    const int64_t windows = a.options.n_chunks < 0 ? n / c : std::min(a.options.n_chunks, n / c);
    std::fprintf(stderr, "perplexity: calculating perplexity over %lld chunks of %lld tokens (text: %lld tokens), "
                 "n_ctx=%lld, batch_size=%lld, n_seq=%lld\n", (long long)windows, (long long)c, (long long)n,
                 (long long)c, (long long)a.options.n_batch, (long long)perplexity_windows_per_call(*model, a.options));
  }
  const PerplexityResult r = perplexity(*model, input.tokens, a.options, [](const PerplexityResult& so_far) {
    std::printf("[%zu]%.4f,", so_far.running_ppl.size(), so_far.running_ppl.back());
    std::fflush(stdout);
  });
  std::printf("\n");
  if (std::isnan(r.ppl_error))
    std::printf("Final estimate: PPL = %.4f (the scored tokens' log-probabilities do not vary: no error estimate)\n",
                r.ppl);
  else
    std::printf("Final estimate: PPL = %.4f +/- %.5f\n", r.ppl, r.ppl_error);
  return 0;
}

}  // namespace attnzoo::cli
