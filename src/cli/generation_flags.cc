#include "cli/generation_flags.h"

#include <filesystem>

#include "core/error.h"
#include "engine/stop.h"
#include "layers/matmul_precision.h"
#include "loader/config.h"
#include "loader/model_dir.h"

namespace attnzoo::cli {

const char* kGenerationFlagsUsage =
    "[-n|--max-new-tokens|--n-predict 128] [--temperature|--temp T] [--top-k K] [--top-p P] [--min-p M]\n"
    "         [--repetition-penalty|--repeat-penalty R] [--presence-penalty X] [--frequency-penalty X] [--seed S]\n"
    "         [--dtype float32|bfloat16|auto] [--matmul-precision highest|medium] [--stop STR]...\n"
    "         [--kv-cache-dtype auto|float32|bfloat16|float16] [--block-size 16] [--kv-cache-memory 4G]";


bool parse_generation_flag(const std::vector<std::string>& args, size_t& i, GenerationFlags& a) {
  const std::string& s = args[i];
  auto value = [&]() -> const std::string& {
    if (i + 1 >= args.size()) throw ArgumentError(s + ": needs a value");
    return args[++i];
  };
  if (s == "-m" || s == "--model") a.model = value();
  // llama.cpp's spellings (--n-predict, --temp, --repeat-penalty) as aliases: same meaning, same flag.
  else if (s == "-n" || s == "--max-new-tokens" || s == "--n-predict") a.max_new_tokens = parse_number<int64_t>(s, value());
  else if (s == "--temperature" || s == "--temp") a.temperature = parse_number<float>(s, value());
  else if (s == "--top-k") a.top_k = parse_number<int64_t>(s, value());
  else if (s == "--top-p") a.top_p = parse_number<float>(s, value());
  else if (s == "--min-p") a.min_p = parse_number<float>(s, value());
  else if (s == "--repetition-penalty" || s == "--repeat-penalty") a.repetition_penalty = parse_number<float>(s, value());
  else if (s == "--presence-penalty") a.presence_penalty = parse_number<float>(s, value());
  else if (s == "--frequency-penalty") a.frequency_penalty = parse_number<float>(s, value());
  else if (s == "--seed") a.seed = parse_number<uint64_t>(s, value());
  else if (s == "--dtype") a.dtype = value();
  else if (s == "--matmul-precision") set_matmul_precision(parse_matmul_precision(value()));
  else if (s == "--stop") a.stop.push_back(value());
  else if (s == "--kv-cache-dtype") a.kv_cache_dtype = value();
  else if (s == "--block-size") a.block_size = parse_number<int64_t>(s, value());
  else if (s == "--kv-cache-memory") a.kv_cache_memory = parse_byte_size(s, value());
  else return false;
  return true;
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

std::string read_all(std::FILE* f, const std::string& what) {
  std::string out;
  char buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
  if (std::ferror(f)) throw ArgumentError(what + ": read failed");
  return out;
}

std::string read_text_file(const std::string& flag, const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw ArgumentError(flag + ": '" + path + "' is a directory, not a text file");
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw ArgumentError(flag + ": cannot open '" + path + "'");
  std::string text;
  try {
    text = read_all(f, flag + ": " + path);
  } catch (...) {
    std::fclose(f);
    throw;
  }
  std::fclose(f);
  return text;
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

LoadOptions load_options(const GenerationFlags& a) {
  LoadOptions options = parse_load_dtype(a.dtype, ModelFiles::read_config(a.model));
  options.pool.kv_dtype = parse_kv_cache_dtype(a.kv_cache_dtype, options.pool.kv_dtype);
  require(a.block_size > 0, "--block-size", "must be positive, got " + std::to_string(a.block_size));
  options.pool.block_tokens = a.block_size;
  options.pool.bytes = a.kv_cache_memory;
  return options;
}

GenerationOptions generation_options(const GenerationFlags& a) {
  GenerationOptions options;
  SamplingParams& p = options.sampling;
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
  options.max_new_tokens = a.max_new_tokens;
  options.stop = a.stop;
  options.eos_token_ids = load_eos_token_ids(a.model);
  return options;
}

}  // namespace attnzoo::cli
