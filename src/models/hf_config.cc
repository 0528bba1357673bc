#include "models/hf_config.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "loader/load_error.h"

namespace attnzoo {
namespace {

// Phi-3's LongRoPE as transformers computes it: the pretraining context is the top-level
// original_max_position_embeddings when present (Phi-3 keeps it there), else the rope dict's; factor defaults to
// max_position_embeddings / that, and the attention factor to sqrt(1 + ln(factor) / ln(original)). transformers
// switches to long_factor whenever a forward pass reaches past the original context (and its generate() then
// recomputes the whole cache with them); a paged cache cannot re-rotate the keys it holds, so the set is chosen
// once per model, as llama.cpp (context size) and vLLM (max_model_len) do: long_factor when the model's context
// exceeds the original one. That equals transformers for every prompt of a short-context model and for prompts
// longer than the original context of a long-context one.
void read_longrope(const Config& c, const Config& p, RopeConfig& r) {
  const int64_t max_pos = c.get_int_or("max_position_embeddings", 0);
  r.original_max_position_embeddings =
      c.get_int_or("original_max_position_embeddings", p.get_int_or("original_max_position_embeddings", max_pos));
  const int64_t original = r.original_max_position_embeddings;
  if (original <= 1) throw LoadError(c.source() + ": key 'original_max_position_embeddings': must be > 1 for longrope");
  r.factor = p.has("factor") ? p.get_float("factor") : double(max_pos) / double(original);
  r.attention_factor = p.has("attention_factor") ? p.get_float("attention_factor")
                       : r.factor <= 1.0         ? 1.0
                                                 : std::sqrt(1.0 + std::log(r.factor) / std::log(double(original)));
  r.ext_factors = p.get_float_list(max_pos > original ? "long_factor" : "short_factor");
}

}  // namespace

RopeConfig read_rope(const Config& c, int64_t head_dim, RotaryShare share) {
  RopeConfig r;
  r.head_dim = head_dim;
  const bool nested = c.has("rope_parameters");
  const bool scaling = !nested && c.has("rope_scaling");
  const Config p = nested ? c.sub("rope_parameters") : scaling ? c.sub("rope_scaling") : c;
  r.theta = p.get_float_or("rope_theta", c.get_float_or("rope_theta", 10000.0));
  r.type = p.get_string_or("rope_type", p.get_string_or("type", "default"));
  const double partial =
      share.read ? p.get_float_or("partial_rotary_factor", c.get_float_or("partial_rotary_factor", share.factor))
                 : share.factor;
  r.rotary_dim = int64_t(double(head_dim) * partial);
  if (r.type == "llama3" || r.type == "yarn") {
    const int64_t max_pos = c.get_int_or("max_position_embeddings", 0);
    r.original_max_position_embeddings =
        p.get_int_or("original_max_position_embeddings", c.get_int_or("original_max_position_embeddings", max_pos));
    r.factor = p.has("factor") ? p.get_float("factor")
                               : double(max_pos) / double(std::max<int64_t>(1, r.original_max_position_embeddings));
    r.low_freq_factor = p.get_float_or("low_freq_factor", 1.0);
    r.high_freq_factor = p.get_float_or("high_freq_factor", 4.0);
    r.beta_fast = p.get_float_or("beta_fast", 32.0);
    r.beta_slow = p.get_float_or("beta_slow", 1.0);
    r.attention_factor = p.get_float_or("attention_factor", 0.0);
    r.mscale = p.get_float_or("mscale", 0.0);
    r.mscale_all_dim = p.get_float_or("mscale_all_dim", 0.0);
    r.truncate = p.get_bool_or("truncate", true);
  } else if (r.type == "linear") {
    r.factor = p.get_float("factor");
    r.mscale_all_dim = p.get_float_or("mscale_all_dim", 0.0);  // DeepSeek's softmax scale reads it for any scaling
  } else if (r.type == "longrope" || r.type == "su") {  // "su": Phi-3's first name for it
    r.type = "longrope";
    read_longrope(c, p, r);
  } else if (r.type != "default") {
    throw LoadError(c.source() + ": rope type '" + r.type + "' is not supported (default, linear, llama3, yarn, longrope)");
  }
  return r;
}

int64_t context_length(const Config& c) {
  const int64_t max_pos = c.get_int_or("max_position_embeddings", 0);
  const bool nested = c.has("rope_parameters");
  if (max_pos <= 0 || (!nested && !c.has("rope_scaling"))) return max_pos;
  const Config p = c.sub(nested ? "rope_parameters" : "rope_scaling");
  if (p.get_string_or("rope_type", p.get_string_or("type", "default")) != "yarn" || !p.has("factor")) return max_pos;
  const int64_t top = c.get_int_or("original_max_position_embeddings", max_pos);
  const double original = double(p.get_int_or("original_max_position_embeddings", top));
  const double extended = original * p.get_float("factor");
  // Past 2^40 positions no cache could hold the sequence anyway; the bound keeps the product an integer.
  return extended > double(max_pos) ? int64_t(std::min(extended, 0x1p40)) : max_pos;
}

int64_t layer_window(const Config& c, int64_t i, int64_t num_layers) {
  const int64_t window = c.get_int_or("sliding_window", 0);
  // Qwen2 / Qwen3 / SmolLM3 window nothing unless use_sliding_window (default false) says so, and then, in configs written
  // before layer_types existed, only the layers from max_window_layers (default 28) on.
  const std::string type = c.get_string_or("model_type", "");
  const bool qwen = type == "qwen2" || type == "qwen3";
  if ((qwen || type == "smollm3") && !c.get_bool_or("use_sliding_window", false)) return 0;
  if (c.has("layer_types")) {
    const auto types = c.get_string_list("layer_types");
    if (int64_t(types.size()) != num_layers)
      throw LoadError(c.source() + ": key 'layer_types': expected " + std::to_string(num_layers) + " entries");
    const std::string& t = types[size_t(i)];
    if (t != "full_attention" && t != "sliding_attention")
      throw LoadError(c.source() + ": key 'layer_types': unknown layer type '" + t + "' at index " + std::to_string(i));
    return t == "sliding_attention" ? window : 0;
  }
  if (c.has("use_sliding_window") && !c.get_bool("use_sliding_window")) return 0;
  if (qwen && i < c.get_int_or("max_window_layers", 28)) return 0;
  return window;
}


}  // namespace attnzoo
