#include "engine/sampling_defaults.h"

#include <filesystem>

#include "loader/config.h"

namespace attnzoo {

SamplingParams resolve_sampling(const std::string& model_path, const SamplingOverrides& o) {
  namespace fs = std::filesystem;
  bool do_sample = false;
  SamplingParams p;
  p.temperature = 1.f;
  p.top_k = 50;
  std::error_code ec;
  const fs::path gen = fs::path(model_path) / "generation_config.json";
  if (!model_path.empty() && fs::is_directory(model_path, ec) && fs::exists(gen, ec)) {
    const Config g = Config::load(gen.string());
    do_sample = g.get_bool_or("do_sample", false);
    p.temperature = float(g.get_float_or("temperature", 1.0));
    p.top_k = g.get_int_or("top_k", 50);
    p.top_p = float(g.get_float_or("top_p", 1.0));
    p.min_p = float(g.get_float_or("min_p", 0.0));
    p.repetition_penalty = float(g.get_float_or("repetition_penalty", 1.0));
  }
  if (o.do_sample)
    do_sample = *o.do_sample;
  else if (o.temperature)
    do_sample = *o.temperature > 0.f;
  p.temperature = do_sample ? o.temperature.value_or(p.temperature) : 0.f;
  if (o.top_k) p.top_k = *o.top_k;
  if (o.top_p) p.top_p = *o.top_p;
  if (o.min_p) p.min_p = *o.min_p;
  if (o.repetition_penalty) p.repetition_penalty = *o.repetition_penalty;
  p.validate();
  return p;
}

}  // namespace attnzoo
