#include "engine/sampling_defaults.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "loader/config.h"
#include "loader/load_error.h"

namespace attnzoo {
namespace {

// generation_config.json when `model_path` is a directory holding one.
std::optional<std::filesystem::path> generation_config(const std::string& model_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path gen = fs::path(model_path) / "generation_config.json";
  if (model_path.empty() || !fs::is_directory(model_path, ec) || !fs::exists(gen, ec)) return std::nullopt;
  return gen;
}

// What generation_config.json says, or transformers' defaults where it says nothing.
struct FileDefaults {
  bool do_sample = false;
  float temperature = 1.f, top_p = 1.f, min_p = 0.f, repetition_penalty = 1.f;
  int64_t top_k = 50;
};

SamplingParams merge(const FileDefaults& f, const SamplingOverrides& o) {
  SamplingParams p;
  bool do_sample = f.do_sample;
  if (o.do_sample)
    do_sample = *o.do_sample;
  else if (o.temperature)
    do_sample = *o.temperature > 0.f;
  p.temperature = do_sample ? o.temperature.value_or(f.temperature) : 0.f;
  // A temperature the caller gave that is no temperature (nan, negative) is left for validate() to refuse:
  // dropped for greedy above, a typo would run as temperature 0.
  if (o.temperature && !(*o.temperature >= 0.f)) p.temperature = *o.temperature;
  p.top_k = o.top_k.value_or(f.top_k);
  p.top_p = o.top_p.value_or(f.top_p);
  p.min_p = o.min_p.value_or(f.min_p);
  p.repetition_penalty = o.repetition_penalty.value_or(f.repetition_penalty);
  return p;
}

}  // namespace

SamplingParams resolve_sampling(const std::string& model_path, const SamplingOverrides& o) {
  FileDefaults f;
  const auto file = generation_config(model_path);
  const bool read = file.has_value();
  const std::string gen = read ? file->string() : std::string();
  if (read) {
    const Config g = Config::load(gen);
    f.do_sample = g.get_bool_or("do_sample", false);
    f.temperature = float(g.get_float_or("temperature", 1.0));
    f.top_k = g.get_int_or("top_k", 50);
    f.top_p = float(g.get_float_or("top_p", 1.0));
    f.min_p = float(g.get_float_or("min_p", 0.0));
    f.repetition_penalty = float(g.get_float_or("repetition_penalty", 1.0));
  }
  const SamplingParams p = merge(f, o);
  try {
    p.validate();
  } catch (const ArgumentError& e) {
    if (!read) throw;
    // A value the caller gave fails without the file too, and stays the caller's; any other came from the file,
    // and must not read as the flag of the same name (--temperature).
    merge(FileDefaults{}, o).validate();
    throw LoadError(gen + ": " + e.what());
  }
  return p;
}

int64_t resolve_min_new_tokens(const std::string& model_path, std::optional<int64_t> min_new_tokens,
                               int64_t prompt_tokens) {
  if (min_new_tokens) {
    require(*min_new_tokens >= 0, "min_new_tokens", "must be >= 0, got " + std::to_string(*min_new_tokens));
    return *min_new_tokens;
  }
  const auto file = generation_config(model_path);
  if (!file) return 0;
  const Config g = Config::load(file->string());
  // transformers: min_new_tokens wins over min_length when both are set.
  const bool new_tokens = g.has("min_new_tokens");
  const char* key = new_tokens ? "min_new_tokens" : "min_length";
  const int64_t value = g.get_int_or(key, 0);
  if (value < 0) throw LoadError(file->string() + ": " + key + ": must be >= 0, got " + std::to_string(value));
  return new_tokens ? value : std::max<int64_t>(0, value - prompt_tokens);
}

}  // namespace attnzoo
