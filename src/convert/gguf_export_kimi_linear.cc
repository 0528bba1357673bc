#include "convert/gguf_export_kimi_linear.h"

#include "convert/gguf_export_deepseek2.h"
#include "convert/gguf_export_hybrids.h"
#include "loader/gguf_kimi_linear.h"
#include "loader/load_error.h"
#include "models/kimi_linear_layout.h"

namespace attnzoo {
namespace {

// llama.cpp's MoE layers are those from leading_dense_block_count on: the dense layers before the first MoE one.
int64_t leading_dense(const Config& c, const KimiLinearLayout& l) {
  const int64_t layers = int64_t(l.sparse.size());
  int64_t dense = 0;
  while (dense < layers && !l.sparse[size_t(dense)]) ++dense;
  for (int64_t i = dense; i < layers; ++i)
    if (!l.sparse[size_t(i)])
      throw LoadError(c.source() + ": key 'mlp_layer_types': dense layer " + std::to_string(i) + " after MoE layer " +
                      std::to_string(dense) + " has no kimi-linear form (llama.cpp's MoE layers are all those from "
                      "leading_dense_block_count on)");
  return dense;
}

}  // namespace

void add_kimi_linear_hparams(GgufWriter& w, const Config& c) {
  const std::string p = "kimi-linear.";
  const KimiLinearLayout l = read_kimi_linear_layout(c);
  const int64_t layers = c.get_int("num_hidden_layers"), heads = c.get_int("num_attention_heads");
  if (l.kda_heads != heads)
    throw LoadError(c.source() + ": key 'linear_attn_config.num_heads' / 'linear_num_heads': " +
                    std::to_string(l.kda_heads) + " KDA heads beside " + std::to_string(heads) + " attention heads has no kimi-linear form "
                    "(llama.cpp runs both with attention.head_count)");
  const int64_t rope = c.get_int("qk_rope_head_dim"), kv_lora = c.get_int("kv_lora_rank");
  w.add_u32(p + "block_count", uint32_t(layers));
  const int64_t context = c.get_int_or("model_max_length", c.get_int_or("max_position_embeddings", 0));
  if (context > 0) w.add_u32(p + "context_length", uint32_t(context));
  w.add_u32(p + "embedding_length", uint32_t(c.get_int("hidden_size")));
  w.add_u32(p + "feed_forward_length", uint32_t(c.get_int("intermediate_size")));
  w.add_u32(p + "attention.head_count", uint32_t(heads));
  std::vector<int32_t> kv;
  for (bool mla : l.full_attention) kv.push_back(mla ? 1 : 0);
  w.add_i32_array(p + "attention.head_count_kv", kv);
  w.add_f32(p + "attention.layer_norm_rms_epsilon", float(c.get_float_or("rms_norm_eps", 1e-5)));
  w.add_u32(p + "vocab_size", uint32_t(c.get_int("vocab_size")));
  w.add_u32(p + "ssm.conv_kernel", uint32_t(l.conv_kernel));
  w.add_u32(p + "kda.head_dim", uint32_t(l.kda_head_dim));
  if (c.has("q_lora_rank")) w.add_u32(p + "attention.q_lora_rank", uint32_t(c.get_int("q_lora_rank")));
  w.add_u32(p + "attention.kv_lora_rank", uint32_t(kv_lora));
  w.add_u32(p + "rope.dimension_count", uint32_t(rope));
  w.add_u32(p + "attention.key_length", uint32_t(kv_lora + rope));
  w.add_u32(p + "attention.key_length_mla", uint32_t(c.get_int("qk_nope_head_dim") + rope));
  w.add_u32(p + "attention.value_length_mla", uint32_t(c.get_int("v_head_dim")));
  const int64_t dense = leading_dense(c, l);
  w.add_u32(p + "leading_dense_block_count", uint32_t(dense));
  if (l.num_experts <= 0) return;
  const bool renormalize =
      c.has("moe_renormalize") ? c.get_bool("moe_renormalize") : c.get_bool_or("norm_topk_prob", true);
  if (!renormalize)
    throw LoadError(c.source() + ": key 'moe_renormalize': false has no kimi-linear form (llama.cpp always "
                    "renormalizes the top-k weights)");
  w.add_u32(p + "expert_count", uint32_t(l.num_experts));
  w.add_u32(p + "expert_used_count", uint32_t(kimi_int(c, "num_experts_per_token", "num_experts_per_tok", 1)));
  w.add_u32(p + "expert_feed_forward_length", uint32_t(c.get_int("moe_intermediate_size")));
  w.add_u32(p + "expert_shared_count", uint32_t(kimi_int(c, "num_shared_experts", "n_shared_experts", 0)));
  w.add_f32(p + "expert_weights_scale", float(c.get_float_or("routed_scaling_factor", 1.0)));
  w.add_u32(p + "expert_gating_func", 2);  // sigmoid
  const int64_t groups = kimi_int(c, "num_expert_group", "n_group", 1);
  if (groups > 1) {
    w.add_u32(p + "expert_group_count", uint32_t(groups));
    w.add_u32(p + "expert_group_used_count", uint32_t(c.get_int_or("topk_group", 1)));
  }
}

std::vector<TensorPlan> plan_kimi_linear(const ModelFiles& files, const Config& c) {
  const KimiLinearLayout l = read_kimi_linear_layout(c);
  const int64_t heads = c.get_int("num_attention_heads"), nope = c.get_int("qk_nope_head_dim");
  const int64_t v = c.get_int("v_head_dim"), rank = c.get_int("kv_lora_rank");
  std::vector<TensorPlan> plans;
  size_t experts = 0;
  for (const std::string& name : files.names()) {
    if (name.find(".block_sparse_moe.experts.") != std::string::npos) {
      ++experts;
      continue;
    }
    const auto [blk, rest] = split_block_name(name);
    if (!blk.empty() && rest == "self_attn.kv_b_proj.weight") {
      for (TensorPlan& h : plan_kv_b_split(files, name, blk, heads, nope, v, rank)) plans.push_back(std::move(h));
      continue;
    }
    const auto gguf_name = gguf_kimi_linear_tensor_name(name);
    if (!gguf_name)
      throw LoadError(files.source(name) + ": tensor '" + name + "' has no GGUF counterpart for kimi-linear");
    TensorPlan p;
    p.gguf_name = *gguf_name;
    p.sources = {name};
    p.shape = files.stored(name).shape;
    if (rest.ends_with("_conv1d.weight")) {
      if (p.shape.size() != 3 || p.shape[1] != 1)
        throw LoadError(files.source(name) + ": tensor '" + name + "': expected a [channels, 1, kernel] convolution");
      p.shape = {1, p.shape[0], 1, p.shape[2]};
      p.type = QuantType::F32;
    } else if (!plan_ssm_edit(files, name, p) && p.gguf_name.ends_with(".ffn_gate_inp.weight")) {
      p.type = QuantType::F32;  // the router, as llama-quantize keeps it
    }
    plans.push_back(std::move(p));
  }
  std::vector<int64_t> moe_layers;
  for (size_t i = 0; i < l.sparse.size(); ++i)
    if (l.sparse[i]) moe_layers.push_back(int64_t(i));
  std::vector<TensorPlan> stacked =
      plan_stacked_experts(files, moe_layers, std::max<int64_t>(l.num_experts, 0),
                           {"block_sparse_moe", {{"w1", "ffn_gate_exps"}, {"w3", "ffn_up_exps"}, {"w2", "ffn_down_exps"}}},
                           experts);
  plans.insert(plans.end(), stacked.begin(), stacked.end());
  return plans;
}

}  // namespace attnzoo
