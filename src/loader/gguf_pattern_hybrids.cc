#include "loader/gguf_pattern_hybrids.h"

#include <cmath>
#include <string>
#include <vector>

namespace attnzoo {
namespace {

using gguf_hf::any_block_has;
using gguf_hf::JsonObject;
using gguf_hf::Meta;

// A per-layer key (`layers` values, each in [0, bound]); a single value holds for every layer, an absent key is 0.
std::vector<int64_t> per_layer(const Meta& m, const std::string& k, int64_t layers, std::string_view hf_key) {
  const std::string key = m.p + k;
  std::vector<int64_t> out(size_t(layers), 0);
  const GgufValue* v = m.f.find(key);
  if (v && v->is_array()) {
    if (int64_t(v->size()) != layers)
      throw LoadError(m.f.path() + ": key '" + key + "': expected " + std::to_string(layers) + " values (one per layer)");
    for (uint64_t i = 0; i < v->size(); ++i) out[i] = v->at(i).as_int(key);
  } else if (v) {
    std::fill(out.begin(), out.end(), m.i(k));
  }
  const int64_t bound = config_count_limit(hf_key);
  for (int64_t x : out)
    if (x < 0 || x > bound)
      throw LoadError(m.f.path() + ": key '" + key + "': values must be in [0, " + std::to_string(bound) + "]");
  return out;
}

// The one positive value of a per-layer list (0 when every layer has 0); layers differing are refused.
int64_t shared_value(const Meta& m, const std::vector<int64_t>& v, const std::string& k) {
  int64_t one = 0;
  for (int64_t x : v) {
    if (x && one && x != one)
      throw LoadError(m.f.path() + ": key '" + m.p + k + "': the layers that have one must share one value");
    if (x) one = x;
  }
  return one;
}

// head_count (a single value, or per layer with 0 for non-attention layers) and head_count_kv per layer.
struct Heads {
  int64_t q = 0, kv = 0;
  std::vector<int64_t> kv_per_layer;
};

Heads heads_of(const Meta& m, int64_t layers) {
  Heads h;
  h.q = shared_value(m, per_layer(m, "attention.head_count", layers, "num_attention_heads"), "attention.head_count");
  h.kv_per_layer = per_layer(m, "attention.head_count_kv", layers, "num_key_value_heads");
  h.kv = shared_value(m, h.kv_per_layer, "attention.head_count_kv");
  if (h.q <= 0) throw LoadError(m.f.path() + ": key '" + m.p + "attention.head_count': must be positive");
  if (h.kv == 0) h.kv = h.q;  // no attention layer: any valid count
  return h;
}

// The Mamba-2 shape every hybrid file states the same way; `keys`: the config names (heads, head_dim, groups,
// state, conv).
void add_mamba2(JsonObject& c, const Meta& m, const char* const (&keys)[5]) {
  const int64_t inner = m.positive("ssm.inner_size");
  const int64_t heads = m.count("ssm.time_step_rank", "num_heads");
  c.add_int(keys[0], heads);
  c.add_int(keys[1], m.ratio(inner, "ssm.inner_size", heads, "ssm.time_step_rank"));
  c.add_int(keys[2], m.has("ssm.group_count") ? m.count("ssm.group_count", "n_groups") : 1);
  c.add_int(keys[3], m.count("ssm.state_size", "state_size"));
  c.add_int(keys[4], m.count("ssm.conv_kernel", "conv_kernel"));
}

}  // namespace

std::pair<int64_t, int64_t> pattern_hybrid_heads(const Meta& m) {
  const Heads h = heads_of(m, m.layers());
  return {h.q, h.kv};
}

void nemotron_h_config(JsonObject& c, const Meta& m, bool moe) {
  gguf_hf::add_class(c, "NemotronHForCausalLM", "nemotron_h");
  const int64_t layers = m.layers(), hidden = m.positive("embedding_length");
  const Heads h = heads_of(m, layers);
  const std::vector<int64_t> ff = per_layer(m, "feed_forward_length", layers, "intermediate_size");
  std::string pattern;
  for (int64_t i = 0; i < layers; ++i) {
    if (h.kv_per_layer[size_t(i)] && ff[size_t(i)])
      throw LoadError(m.f.path() + ": layer " + std::to_string(i) + " has both attention heads and a feed-forward "
                      "length: a nemotron_h layer is one or the other");
    pattern += h.kv_per_layer[size_t(i)] ? '*' : ff[size_t(i)] ? (moe ? 'E' : '-') : 'M';
  }
  c.add_string("hybrid_override_pattern", pattern);
  c.add_int("hidden_size", hidden);
  c.add_int("num_hidden_layers", layers);
  const int64_t inter = shared_value(m, ff, "feed_forward_length");
  c.add_int("intermediate_size", inter ? inter : 1);  // no MLP layer: unused
  c.add_int("num_attention_heads", h.q);
  c.add_int("num_key_value_heads", h.kv);
  c.add_int("head_dim", m.has("attention.key_length") ? m.positive("attention.key_length") : hidden / h.q);
  if (m.has("context_length")) c.add_int("max_position_embeddings", m.i("context_length"));
  add_mamba2(c, m, {"mamba_num_heads", "mamba_head_dim", "n_groups", "ssm_state_size", "conv_kernel"});
  c.add_float("time_step_min", 0.0);  // llama.cpp's scan clamps no dt
  c.add_float("layer_norm_epsilon", m.eps());
  c.add_bool("use_conv_bias", any_block_has(m.f, "ssm_conv1d.bias"));
  c.add_bool("use_bias", any_block_has(m.f, "ssm_in.bias"));
  c.add_bool("mlp_bias", any_block_has(m.f, "ffn_up.bias"));
  c.add_string("mamba_hidden_act", "silu");
  c.add_string("mlp_hidden_act", "relu2");
  if (!moe) return;
  c.add_int("n_routed_experts", m.count("expert_count", "num_experts"));
  c.add_int("num_experts_per_tok", m.count("expert_used_count", "num_experts_per_tok"));
  c.add_int("moe_intermediate_size", m.has("expert_feed_forward_length") ? m.positive("expert_feed_forward_length")
                                                                          : std::max<int64_t>(inter, 1));
  c.add_int("moe_shared_expert_intermediate_size", m.positive("expert_shared_feed_forward_length"));
  c.add_int("n_group", m.has("expert_group_count") ? m.count("expert_group_count", "num_experts") : 1);
  c.add_int("topk_group", m.has("expert_group_used_count") ? m.count("expert_group_used_count", "num_experts") : 1);
  c.add_bool("norm_topk_prob", !m.has("expert_weights_norm") ||
                                   m.f.find(m.p + "expert_weights_norm")->as_bool(m.p + "expert_weights_norm"));
  c.add_float("routed_scaling_factor", m.has("expert_weights_scale") ? m.d("expert_weights_scale") : 1.0);
}

void granite_hybrid_config(JsonObject& c, const Meta& m) {
  gguf_hf::add_class(c, "GraniteMoeHybridForCausalLM", "granitemoehybrid");
  const int64_t layers = m.layers(), hidden = m.positive("embedding_length");
  const Heads h = heads_of(m, layers);
  std::string types = "[";
  for (int64_t i = 0; i < layers; ++i)
    types += std::string(i ? ", " : "") + (h.kv_per_layer[size_t(i)] ? "\"attention\"" : "\"mamba\"");
  c.add("layer_types", types + "]");
  c.add_int("hidden_size", hidden);
  c.add_int("num_hidden_layers", layers);
  c.add_int("num_attention_heads", h.q);
  c.add_int("num_key_value_heads", h.kv);
  const int64_t head_dim = m.has("attention.key_length") ? m.positive("attention.key_length") : hidden / h.q;
  c.add_int("head_dim", head_dim);
  const int64_t experts = m.has("expert_count") ? m.i("expert_count") : 0;
  const int64_t ff = m.has("feed_forward_length")
                         ? shared_value(m, per_layer(m, "feed_forward_length", layers, "intermediate_size"),
                                        "feed_forward_length")
                         : 0;
  if (experts > 0) {
    c.add_int("num_local_experts", m.count("expert_count", "num_experts"));
    c.add_int("num_experts_per_tok", m.count("expert_used_count", "num_experts_per_tok"));
    c.add_int("intermediate_size", m.has("expert_feed_forward_length") ? m.positive("expert_feed_forward_length") : ff);
    c.add_int("shared_intermediate_size", m.positive("expert_shared_feed_forward_length"));
  } else {  // dense: the one MLP is the shared one (Bamba's feed_forward, Granite-H's shared_mlp)
    c.add_int("num_local_experts", 0);
    const int64_t dense = m.has("expert_shared_feed_forward_length") ? m.positive("expert_shared_feed_forward_length") : ff;
    if (dense <= 0) throw LoadError(m.f.path() + ": key '" + m.p + "feed_forward_length': must be positive");
    c.add_int("intermediate_size", dense);
    c.add_int("shared_intermediate_size", dense);
  }
  add_mamba2(c, m, {"mamba_n_heads", "mamba_d_head", "mamba_n_groups", "mamba_d_state", "mamba_d_conv"});
  c.add_float("rms_norm_eps", m.eps());
  c.add_bool("mamba_conv_bias", any_block_has(m.f, "ssm_conv1d.bias"));
  c.add_bool("mamba_proj_bias", any_block_has(m.f, "ssm_in.bias"));
  c.add_bool("attention_bias", any_block_has(m.f, "attn_q.bias"));
  c.add_string("hidden_act", "silu");
  c.add_float("embedding_multiplier", m.has("embedding_scale") ? m.d("embedding_scale") : 1.0);
  c.add_float("residual_multiplier", m.has("residual_scale") ? m.d("residual_scale") : 1.0);
  c.add_float("logits_scaling", m.has("logit_scale") ? m.d("logit_scale") : 1.0);
  // llama.cpp scales by head_dim^-0.5 when the file has no attention.scale (Bamba's converter writes none)
  c.add_float("attention_multiplier",
              m.has("attention.scale") ? m.d("attention.scale") : 1.0 / std::sqrt(double(head_dim)));
  const bool rope = m.has("rope.scaling.finetuned") && m.f.find(m.p + "rope.scaling.finetuned")->as_bool(m.p + "rope.scaling.finetuned");
  c.add_string("position_embedding_type", rope ? "rope" : "nope");
  c.add_float("rope_theta", m.has("rope.freq_base") ? m.d("rope.freq_base") : 10000.0);
  if (rope) gguf_hf::add_rotary_share(c, m, "granitemoehybrid", head_dim);
  if (m.has("context_length")) c.add_int("max_position_embeddings", m.i("context_length"));
}

}  // namespace attnzoo
