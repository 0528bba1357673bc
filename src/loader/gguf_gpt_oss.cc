#include "loader/gguf_gpt_oss.h"

namespace attnzoo {

void add_gpt_oss_config(gguf_hf::JsonObject& c, const GgufFile& f, int64_t layers, bool has_feed_forward_length) {
  const gguf_hf::Meta m{f, "gpt-oss."};
  c.add_int("num_local_experts", m.count("expert_count", "num_local_experts"));
  c.add_int("num_experts_per_tok", m.count("expert_used_count", "num_experts_per_tok"));
  if (!has_feed_forward_length) c.add_int("intermediate_size", m.positive("expert_feed_forward_length"));
  c.add_int("sliding_window", m.positive("attention.sliding_window"));
  // llama.cpp's set_swa_pattern(n): layer i slides unless (i + 1) % n == 0; n 2 unless the key says otherwise
  // (one number, or one bool per layer).
  std::vector<bool> slides(static_cast<size_t>(layers));
  const std::string key = "gpt-oss.attention.sliding_window_pattern";
  const GgufValue* v = f.find(key);
  if (v && v->is_array()) {
    if (v->elem_type() != GgufType::BOOL || int64_t(v->size()) != layers)
      throw LoadError(f.path() + ": key '" + key + "': expected " + std::to_string(layers) + " bools (one per layer)");
    for (uint64_t i = 0; i < v->size(); ++i) slides[i] = v->at(i).as_bool(key);
  } else {
    const int64_t period = v ? m.bounded("attention.sliding_window_pattern", layers + 1) : 2;
    for (int64_t i = 0; i < layers; ++i) slides[size_t(i)] = (i + 1) % period != 0;
  }
  std::string types = "[";
  for (size_t i = 0; i < slides.size(); ++i)
    types += std::string(i ? ", " : "") + (slides[i] ? "\"sliding_attention\"" : "\"full_attention\"");
  c.add("layer_types", types + "]");
}

bool add_gpt_oss_tensor(const GgufFile& f, const GgufTensor& t, const std::string& layer, const std::string& rest,
                        std::vector<GgufHfTensor>& out) {
  if (rest == "attn_sinks.weight") {
    out.push_back(gguf_hf::as_stored(t, layer + "self_attn.sinks"));
    return true;
  }
  const std::string prefix = layer + "mlp.experts.";
  for (const char* proj : {"gate", "up", "down"}) {
    const std::string base = std::string("ffn_") + proj + "_exps";
    if (rest == base + ".weight") return gguf_hf::add_expert_slices(f, t, prefix, base, out);
    if (rest != base + ".bias") continue;
    // [n_expert, rows] (ne = [rows, n_expert]): one row per expert
    if (t.ne.size() != 2)
      gguf_hf::fail(f, t.name, "expected 2 dimensions (experts stacked), got " + std::to_string(t.ne.size()));
    if (!gguf_hf::plain_float(t.type))
      gguf_hf::fail(f, t.name,
                    std::string("biases stored as ") + quant_type_name(t.type) + " (F32, F16 or BF16 expected)");
    const int64_t experts = t.ne[1], per = experts ? t.bytes / experts : 0;
    if (experts > config_count_limit("num_local_experts"))
      gguf_hf::fail(f, t.name, std::to_string(experts) + " experts, over the " +
                                   std::to_string(config_count_limit("num_local_experts")) + " any model has");
    gguf_hf::check_expert_stack(f, t, experts, t.ne[0] == 0);
    for (int64_t e = 0; e < experts; ++e) {
      GgufHfTensor x = gguf_hf::as_stored(t, prefix + std::to_string(e) + "." + proj + "_proj.bias");
      x.shape = {t.ne[0]};
      x.data = t.data + e * per;
      x.bytes = per;
      out.push_back(std::move(x));
    }
    return true;
  }
  return false;
}

}  // namespace attnzoo
