#include "engine/sampling_defaults.h"

#include <filesystem>

#include "loader/config.h"
#include "loader/load_error.h"

namespace attnzoo {
namespace {

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
  namespace fs = std::filesystem;
  FileDefaults f;
  std::error_code ec;
  const fs::path gen = fs::path(model_path) / "generation_config.json";
  const bool read = !model_path.empty() && fs::is_directory(model_path, ec) && fs::exists(gen, ec);
  if (read) {
    const Config g = Config::load(gen.string());
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
    throw LoadError(gen.string() + ": " + e.what());
  }
  return p;
}

}  // namespace attnzoo
