#include "cli/generation_flags.h"

#include <filesystem>
#include <type_traits>

#include "core/error.h"
#include "engine/stop.h"
#include "layers/matmul_precision.h"
#include "loader/config.h"

namespace attnzoo::cli {

const char* kGenerationFlagsUsage =
    "[-n 128] [--temperature T] [--top-k K] [--top-p P] [--min-p M]\n"
    "         [--repetition-penalty R] [--presence-penalty X] [--frequency-penalty X] [--seed S]\n"
    "         [--dtype float32|bfloat16|auto] [--matmul-precision highest|medium] [--stop STR]...";

namespace {

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

}  // namespace

bool parse_generation_flag(const std::vector<std::string>& args, size_t& i, GenerationFlags& a) {
  const std::string& s = args[i];
  auto value = [&]() -> const std::string& {
    if (i + 1 >= args.size()) throw ArgumentError(s + ": needs a value");
    return args[++i];
  };
  if (s == "-m" || s == "--model") a.model = value();
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
  else return false;
  return true;
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
