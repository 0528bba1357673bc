#include "loader/gguf_phi3.h"

#include <cmath>
#include <cstring>
#include <vector>

namespace attnzoo {
namespace {

// One factor set as a JSON list, each value at the precision that reads back as the same f32.
std::string factor_list(const GgufFile& f, const GgufTensor& t, int64_t n) {
  if (t.type != QuantType::F32 || t.ne.size() != 1 || t.ne[0] != n)
    gguf_hf::fail(f, t.name, "expected " + std::to_string(n) + " F32 values (rope.dimension_count / 2)");
  std::vector<float> v(size_t(t.ne[0]));
  std::memcpy(v.data(), t.data, v.size() * sizeof(float));
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (!std::isfinite(v[i]) || v[i] <= 0) gguf_hf::fail(f, t.name, "LongRoPE factors must be positive");
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", double(v[i]));
    out += std::string(i ? ", " : "") + buf;
  }
  return out + "]";
}

}  // namespace

bool is_phi3_rope_factors(const std::string& name) {
  return name == "rope_factors_long.weight" || name == "rope_factors_short.weight";
}

void add_phi3_config(gguf_hf::JsonObject& c, const GgufFile& f, int64_t head_dim) {
  const std::string p = "phi3.";
  // The width add_rotary_share checked and stated as partial_rotary_factor.
  const int64_t rope_dim = f.has(p + "rope.dimension_count") ? f.get_int(p + "rope.dimension_count") : head_dim;
  if (f.has(p + "rope.scaling.original_context_length"))
    c.add_int("original_max_position_embeddings", f.get_int(p + "rope.scaling.original_context_length"));
  if (f.has(p + "attention.sliding_window") && f.get_int(p + "attention.sliding_window") > 0)
    c.add_int("sliding_window", f.get_int(p + "attention.sliding_window"));
  const GgufTensor* long_factors = f.find_tensor("rope_factors_long.weight");
  const GgufTensor* short_factors = f.find_tensor("rope_factors_short.weight");
  if (!long_factors && !short_factors) return;
  if (!long_factors || !short_factors)
    throw LoadError(f.path() + ": tensors 'rope_factors_long.weight' and 'rope_factors_short.weight' come together");
  gguf_hf::JsonObject r;
  r.add_string("rope_type", "longrope");
  r.add("long_factor", factor_list(f, *long_factors, rope_dim / 2));
  r.add("short_factor", factor_list(f, *short_factors, rope_dim / 2));
  if (f.has(p + "rope.scaling.attn_factor")) r.add_float("attention_factor", f.get_float(p + "rope.scaling.attn_factor"));
  c.add("rope_scaling", r.str());
}

}  // namespace attnzoo
