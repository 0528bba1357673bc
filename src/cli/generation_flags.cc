#include "cli/generation_flags.h"

#include <filesystem>

#include "core/batch_invariance.h"
#include "core/error.h"
#include "engine/sampling_defaults.h"
#include "engine/stop.h"
#include "layers/matmul_precision.h"
#include "loader/config.h"
#include "loader/model_dir.h"
#include "models/model.h"
#include "models/model_device.h"

namespace attnzoo::cli {

const char* kGenerationFlagsUsage =
    "[-n|--max-new-tokens|--n-predict 128] [--min-tokens N (no EOS before N new tokens)]\n"
    "         [--temperature|--temp T] [--top-k K] [--top-p P] [--min-p M]\n"
    "         [--repetition-penalty|--repeat-penalty R] [--presence-penalty X] [--frequency-penalty X]\n"
    "         [--seed S (none or -1: a random one)]\n"
    "         [--dtype auto|float32|bfloat16] [--matmul-precision auto|highest|medium] [--batch-invariant]\n"
    "         [--stop STR]...\n"
    "         [--kv-cache-dtype auto|float32|bfloat16|float16|int8|fp8] [--block-size 16] [--kv-cache-memory 4G]\n"
    "         [--device auto|cpu|cuda[:N]] [--gpu-memory-utilization 0.9]\n"
    "         [-c|--ctx-size N (prompt + answer tokens; default: the model's max_position_embeddings)]";


bool parse_generation_flag(const std::vector<std::string>& args, size_t& i, GenerationFlags& a) {
  const std::string& s = args[i];
  auto value = [&]() -> const std::string& {
    if (i + 1 >= args.size()) throw ArgumentError(s + ": needs a value");
    return args[++i];
  };
  if (s == "-m" || s == "--model") a.model = value();
  // llama.cpp's spellings (--n-predict, --temp, --repeat-penalty) as aliases: same meaning, same flag.
  else if (s == "-n" || s == "--max-new-tokens" || s == "--n-predict") a.max_new_tokens = parse_number<int64_t>(s, value());
  else if (s == "--min-tokens") {
    a.min_tokens = parse_number<int64_t>(s, value());
    require(*a.min_tokens >= 0, s.c_str(), "must be >= 0, got " + std::to_string(*a.min_tokens));
  }
  else if (s == "--temperature" || s == "--temp") a.temperature = parse_number<float>(s, value());
  else if (s == "--top-k") a.top_k = parse_number<int64_t>(s, value());
  else if (s == "--top-p") a.top_p = parse_number<float>(s, value());
  else if (s == "--min-p") a.min_p = parse_number<float>(s, value());
  else if (s == "--repetition-penalty" || s == "--repeat-penalty") a.repetition_penalty = parse_number<float>(s, value());
  else if (s == "--presence-penalty") a.presence_penalty = parse_number<float>(s, value());
  else if (s == "--frequency-penalty") a.frequency_penalty = parse_number<float>(s, value());
  else if (s == "--seed") {
    const std::string& v = value();
    a.seed = v == "-1" ? std::nullopt : std::optional<uint64_t>(parse_number<uint64_t>(s, v));
  }
  else if (s == "--dtype") a.dtype = value();
  else if (s == "--matmul-precision") set_matmul_precision(parse_matmul_precision(value()));
  // The same answer whatever else runs beside it (core/batch_invariance.h); prefill projections cost more.
  else if (s == "--batch-invariant") set_batch_invariant(true);
  else if (s == "--stop") a.stop.push_back(value());
  else if (s == "--kv-cache-dtype") a.kv_cache_dtype = value();
  else if (s == "--block-size") a.block_size = parse_number<int64_t>(s, value());
  else if (s == "--kv-cache-memory") a.kv_cache_memory = parse_byte_size(s, value());
  else if (s == "--device") a.device = value();
  else if (s == "--gpu-memory-utilization") a.gpu_memory_utilization = parse_memory_fraction(s, value());
  else if (s == "-c" || s == "--ctx-size") {
    a.ctx_size = parse_number<int64_t>(s, value());
    require(a.ctx_size >= 0, s.c_str(), "must be >= 0 (0: the model's context), got " + std::to_string(a.ctx_size));
  }
  else return false;
  return true;
}

double parse_memory_fraction(const std::string& flag, const std::string& text) {
  const double v = parse_number<double>(flag, text);
  require(v > 0 && v <= 1, flag.c_str(), "must be a fraction in (0, 1], got " + text);
  return v;
}

std::string default_model_path() {
  return std::string(ATTNZOO_SOURCE_DIR) + "/.models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

void use_default_model(GenerationFlags& flags, const std::string& command) {
  if (!flags.model.empty()) return;
  flags.model = default_model_path();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(flags.model, ec))
    throw ArgumentError(command + ": no -m MODEL given and the default model " + flags.model +
                        " is missing: run scripts/setup.sh to fetch it, or pass -m (a .gguf file, a checkpoint "
                        "directory, or a directory holding one .gguf)");
}

int64_t parse_byte_size(const std::string& flag, const std::string& text) {
  std::string digits = text;
  int shift = 0;
  if (!digits.empty()) {
    const char unit = digits.back() >= 'a' && digits.back() <= 'z' ? char(digits.back() - 'a' + 'A') : digits.back();
    shift = unit == 'K' ? 10 : unit == 'M' ? 20 : unit == 'G' ? 30 : unit == 'T' ? 40 : 0;
    if (shift) digits.pop_back();
  }
  const auto n = parse_number<int64_t>(flag, digits);
  if (n <= 0 || n > (INT64_MAX >> shift))
    throw ArgumentError(flag + ": expected a positive size such as 4G, 512M or 1048576, got '" + text + "'");
  return n << shift;
}

std::string fit_in_context(const GenerationFlags& a, const std::string& command, int64_t model_positions,
                           int64_t n, int64_t& max_new_tokens) {
  const bool flag = a.ctx_size > 0 && (model_positions <= 0 || a.ctx_size < model_positions);
  const int64_t context = flag ? a.ctx_size : model_positions;
  if (context <= 0) return "";
  const std::string what = flag ? "--ctx-size" : std::string("the model's context (") + kContextOrigin + ")";
  if (n >= context)
    throw ArgumentError(command + ": the prompt is " + std::to_string(n) + " tokens; " + what + " is " +
                        std::to_string(context) + " and must leave room for an answer");
  if (n + max_new_tokens <= context) return "";
  max_new_tokens = context - n;
  return "[attnzoo] -n lowered to " + std::to_string(max_new_tokens) + ": prompt " + std::to_string(n) +
         " + answer must fit " + (flag ? "--ctx-size" : "the model's context") + " of " + std::to_string(context) +
         " tokens\n";
}

LoadOptions load_options(const GenerationFlags& a) {
  LoadOptions options = attnzoo::load_options(resolve_formats(a.model, {a.dtype, a.kv_cache_dtype}));
  require(a.block_size > 0, "--block-size", "must be positive, got " + std::to_string(a.block_size));
  options.pool.block_tokens = a.block_size;
  options.pool.bytes = a.kv_cache_memory;
  options.pool.device = resolve_model_device(a.device, "--device");
  options.pool.gpu_memory_utilization = a.gpu_memory_utilization;
  return options;
}

GenerationOptions generation_options(const GenerationFlags& a) {
  GenerationOptions options;
  SamplingOverrides o;
  o.temperature = a.temperature;
  o.top_k = a.top_k;
  o.top_p = a.top_p;
  o.min_p = a.min_p;
  o.repetition_penalty = a.repetition_penalty;
  options.sampling = resolve_sampling(a.model, o);
  SamplingParams& p = options.sampling;
  p.presence_penalty = a.presence_penalty;
  p.frequency_penalty = a.frequency_penalty;
  p.seed = a.seed ? *a.seed : fresh_seed();  // as llama.cpp: a run without --seed samples afresh
  p.validate();
  options.max_new_tokens = a.max_new_tokens;
  // As vLLM refuses min_tokens past max_tokens; a minimum from the checkpoint is cut by -n instead (transformers).
  require(!a.min_tokens || *a.min_tokens <= a.max_new_tokens, "--min-tokens",
          "must be <= -n (" + std::to_string(a.max_new_tokens) + "), got " + std::to_string(a.min_tokens.value_or(0)));
  // Read once here, so a bad value in generation_config.json fails before the model loads, not at the first turn.
  options.min_new_tokens = min_new_tokens(a, 0);
  options.stop = a.stop;
  return options;
}

int64_t min_new_tokens(const GenerationFlags& a, int64_t prompt_tokens) {
  return resolve_min_new_tokens(a.model, a.min_tokens, prompt_tokens);
}

}  // namespace attnzoo::cli
