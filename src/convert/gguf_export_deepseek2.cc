#include "convert/gguf_export_deepseek2.h"

#include <cmath>

#include "loader/gguf_checkpoint.h"
#include "loader/load_error.h"
#include "models/hf_config.h"

namespace attnzoo {
namespace {

bool is_v3(const Config& c) { return c.get_string_list("architectures")[0] == "DeepseekV3ForCausalLM"; }

// N of "model.layers.N.*", -1 for other names.
int64_t layer_of(const std::string& name) {
  constexpr std::string_view kLayers = "model.layers.";
  if (!name.starts_with(kLayers)) return -1;
  int64_t n = 0;
  size_t i = kLayers.size();
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9' && n < (int64_t(1) << 40); ++i) n = n * 10 + (name[i] - '0');
  return i > kLayers.size() && i < name.size() && name[i] == '.' ? n : -1;
}

}  // namespace

void add_deepseek2_hparams(GgufWriter& w, const Config& c) {
  const std::string p = "deepseek2.";
  const int64_t rope_dim = c.get_int("qk_rope_head_dim"), kv_lora = c.get_int("kv_lora_rank");
  const RopeConfig rope = read_rope(c, rope_dim, kWholeHead);
  if (is_v3(c) && !c.get_bool_or("rope_interleave", true))
    throw LoadError(c.source() + ": key 'rope_interleave': false (RoPE on half-split channels) has no deepseek2 "
                    "form (llama.cpp rotates interleaved pairs)");
  w.add_u32(p + "block_count", uint32_t(c.get_int("num_hidden_layers")));
  if (c.has("max_position_embeddings")) w.add_u32(p + "context_length", uint32_t(c.get_int("max_position_embeddings")));
  w.add_u32(p + "embedding_length", uint32_t(c.get_int("hidden_size")));
  w.add_u32(p + "feed_forward_length", uint32_t(c.get_int("intermediate_size")));
  w.add_u32(p + "attention.head_count", uint32_t(c.get_int("num_attention_heads")));
  w.add_u32(p + "attention.head_count_kv", 1);  // the converter's MQA view of the shared latent
  w.add_f32(p + "rope.freq_base", float(rope.theta));
  w.add_f32(p + "attention.layer_norm_rms_epsilon", float(c.get_float_or("rms_norm_eps", 1e-6)));
  w.add_u32(p + "vocab_size", uint32_t(c.get_int("vocab_size")));
  w.add_u32(p + "leading_dense_block_count", uint32_t(c.get_int_or("first_k_dense_replace", 0)));
  if (c.has("q_lora_rank")) w.add_u32(p + "attention.q_lora_rank", uint32_t(c.get_int("q_lora_rank")));
  w.add_u32(p + "attention.kv_lora_rank", uint32_t(kv_lora));
  w.add_u32(p + "attention.key_length", uint32_t(kv_lora + rope_dim));
  w.add_u32(p + "attention.value_length", uint32_t(kv_lora));
  w.add_u32(p + "attention.key_length_mla", uint32_t(c.get_int("qk_nope_head_dim") + rope_dim));
  w.add_u32(p + "attention.value_length_mla", uint32_t(c.get_int("v_head_dim")));
  w.add_u32(p + "rope.dimension_count", uint32_t(rope_dim));
  if (c.has("n_routed_experts")) {
    w.add_u32(p + "expert_count", uint32_t(c.get_int("n_routed_experts")));
    w.add_u32(p + "expert_used_count", uint32_t(c.get_int("num_experts_per_tok")));
    w.add_u32(p + "expert_feed_forward_length", uint32_t(c.get_int("moe_intermediate_size")));
    w.add_u32(p + "expert_shared_count", uint32_t(c.get_int_or("n_shared_experts", 0)));
    w.add_f32(p + "expert_weights_scale", float(c.get_float_or("routed_scaling_factor", 1.0)));
    if (c.get_bool_or("norm_topk_prob", false)) w.add_bool(p + "expert_weights_norm", true);
    // V2's greedy routing is one group; group_limited_greedy keeps its groups (the loader reads them back so)
    const bool grouped = is_v3(c) || c.get_string_or("topk_method", "greedy") == "group_limited_greedy";
    if (grouped && c.has("n_group")) w.add_u32(p + "expert_group_count", uint32_t(c.get_int("n_group")));
    if (grouped && c.has("topk_group")) w.add_u32(p + "expert_group_used_count", uint32_t(c.get_int("topk_group")));
    w.add_u32(p + "expert_gating_func", is_v3(c) ? 2 : 1);  // llama.cpp's sigmoid / softmax
  }
  if (rope.type == "yarn") {
    if (rope.mscale != rope.mscale_all_dim)
      throw LoadError(c.source() + ": YaRN 'mscale' " + std::to_string(rope.mscale) + " differs from 'mscale_all_dim' " +
                      std::to_string(rope.mscale_all_dim) + ", which llama.cpp's deepseek2 cannot express");
    w.add_string(p + "rope.scaling.type", "yarn");
    w.add_f32(p + "rope.scaling.factor", float(rope.factor));
    w.add_u32(p + "rope.scaling.original_context_length", uint32_t(rope.original_max_position_embeddings));
    w.add_f32(p + "rope.scaling.yarn_beta_fast", float(rope.beta_fast));
    w.add_f32(p + "rope.scaling.yarn_beta_slow", float(rope.beta_slow));
    if (rope.mscale_all_dim != 0.0) w.add_f32(p + "rope.scaling.yarn_log_multiplier", float(0.1 * rope.mscale_all_dim));
  } else if (rope.type != "default") {
    throw LoadError(c.source() + ": rope type '" + rope.type + "' has no deepseek2 form (default, yarn)");
  }
}

std::vector<TensorPlan> plan_kv_b_split(const ModelFiles& files, const std::string& name, const std::string& blk,
                                        int64_t heads, int64_t nope, int64_t v, int64_t rank) {
  const std::vector<int64_t> shape = files.stored(name).shape;
  if (shape != std::vector<int64_t>{heads * (nope + v), rank})
    throw LoadError(files.source(name) + ": tensor '" + name + "': expected [" + std::to_string(heads * (nope + v)) +
                    ", " + std::to_string(rank) + "] (num_attention_heads x (qk_nope_head_dim + v_head_dim), "
                    "kv_lora_rank)");
  TensorPlan k, vb;
  k.gguf_name = blk + "attn_k_b.weight";
  vb.gguf_name = blk + "attn_v_b.weight";
  k.sources = vb.sources = {name};
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < nope; ++i) k.rows.push_back(h * (nope + v) + i);
    for (int64_t i = 0; i < v; ++i) vb.rows.push_back(h * (nope + v) + nope + i);
  }
  k.shape = {heads, rank, nope};
  k.transpose_heads = heads;
  vb.shape = {heads, v, rank};
  return {std::move(k), std::move(vb)};
}

std::vector<TensorPlan> plan_deepseek2(const ModelFiles& files, const Config& c, bool tied) {
  const int64_t heads = c.get_int("num_attention_heads"), nope = c.get_int("qk_nope_head_dim");
  const int64_t v = c.get_int("v_head_dim"), rank = c.get_int("kv_lora_rank");
  std::vector<TensorPlan> plans;
  size_t experts = 0;
  const int64_t layers = c.get_int("num_hidden_layers");
  for (const std::string& name : files.names()) {
    if (name.find("rotary_emb.") != std::string::npos) continue;  // buffers recomputed from the config
    if (layer_of(name) >= layers) continue;  // multi-token prediction: the converter leaves it out too
    if (name == "lm_head.weight" && tied) continue;
    if (name.find(".mlp.experts.") != std::string::npos) {
      ++experts;
      continue;
    }
    if (name.ends_with(".self_attn.kv_b_proj.weight")) {
      const std::string blk = *gguf_tensor_name("deepseek2", name);  // blk.N.attn_kv_b.weight
      const std::string prefix = blk.substr(0, blk.size() - std::string("attn_kv_b.weight").size());
      for (TensorPlan& h : plan_kv_b_split(files, name, prefix, heads, nope, v, rank)) plans.push_back(std::move(h));
      continue;
    }
    const auto gguf_name = gguf_tensor_name("deepseek2", name);
    if (!gguf_name) throw LoadError(files.source(name) + ": tensor '" + name + "' has no GGUF counterpart for deepseek2");
    TensorPlan p;
    p.gguf_name = *gguf_name;
    p.sources = {name};
    p.shape = files.stored(name).shape;
    plans.push_back(std::move(p));
  }
  if (c.get_int_or("n_routed_experts", 0) > 0) {
    std::vector<int64_t> moe_layers;
    for (int64_t i = c.get_int_or("first_k_dense_replace", 0); i < layers; ++i) moe_layers.push_back(i);
    std::vector<TensorPlan> stacked =
        plan_stacked_experts(files, moe_layers, c.get_int("n_routed_experts"),
                             {"mlp", {{"gate_proj", "ffn_gate_exps"}, {"up_proj", "ffn_up_exps"},
                                      {"down_proj", "ffn_down_exps"}}},
                             experts);
    plans.insert(plans.end(), stacked.begin(), stacked.end());
  }
  return plans;
}

}  // namespace attnzoo
