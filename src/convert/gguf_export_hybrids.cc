#include "convert/gguf_export_hybrids.h"

#include "loader/gguf_hybrids.h"
#include "loader/load_error.h"
#include "models/hf_config.h"
#include "models/hybrid_stack.h"

namespace attnzoo {
namespace {

const ExpertTensors kLfm2Experts{"feed_forward",
                                 {{"w1", "ffn_gate_exps"}, {"w3", "ffn_up_exps"}, {"w2", "ffn_down_exps"}}};
const ExpertTensors kJambaExperts{
    "feed_forward", {{"gate_proj", "ffn_gate_exps"}, {"up_proj", "ffn_up_exps"}, {"down_proj", "ffn_down_exps"}}};

}  // namespace

std::pair<std::string, std::string> split_block_name(const std::string& name) {
  constexpr std::string_view kLayers = "model.layers.";
  if (!name.starts_with(kLayers)) return {};
  const size_t dot = name.find('.', kLayers.size());
  const std::string index = name.substr(kLayers.size(), dot == std::string::npos ? 0 : dot - kLayers.size());
  if (index.empty() || index.size() > 9 || index.find_first_not_of("0123456789") != std::string::npos) return {};
  return {"blk." + index + ".", name.substr(dot + 1)};
}

std::optional<std::string> conv_hybrid_arch_for_hf(const std::string& hf_class) {
  if (hf_class == "Lfm2ForCausalLM") return "lfm2";
  if (hf_class == "Lfm2MoeForCausalLM") return "lfm2moe";
  if (hf_class == "JambaForCausalLM") return "jamba";
  return std::nullopt;
}

void add_conv_hybrid_hparams(GgufWriter& w, const ModelFiles& files, const Config& c, const std::string& arch) {
  const std::string p = arch + ".";
  const int64_t layers = c.get_int("num_hidden_layers"), heads = c.get_int("num_attention_heads");
  const int64_t kv = c.get_int_or("num_key_value_heads", heads), hidden = c.get_int("hidden_size");
  w.add_u32(p + "block_count", uint32_t(layers));
  if (c.has("max_position_embeddings"))
    w.add_u32(p + "context_length", uint32_t(c.get_int("max_position_embeddings")));
  w.add_u32(p + "embedding_length", uint32_t(hidden));
  w.add_u32(p + "attention.head_count", uint32_t(heads));
  std::vector<int32_t> kv_per_layer;
  const std::vector<HybridLayer> pattern = arch == "jamba" ? jamba_layers(c, layers, 0) : lfm2_layers(c, layers, -1);
  for (const HybridLayer& l : pattern) kv_per_layer.push_back(l.mixer == HybridMixer::attention ? int32_t(kv) : 0);
  w.add_i32_array(p + "attention.head_count_kv", kv_per_layer);
  const int64_t experts = c.get_int_or("num_experts", c.get_int_or("num_local_experts", 0));
  if (arch == "jamba") {
    w.add_u32(p + "feed_forward_length", uint32_t(c.get_int("intermediate_size")));
    w.add_u32(p + "ssm.conv_kernel", uint32_t(c.get_int_or("mamba_d_conv", 4)));
    w.add_u32(p + "ssm.inner_size", uint32_t(c.get_int_or("mamba_expand", 2) * hidden));
    w.add_u32(p + "ssm.state_size", uint32_t(c.get_int_or("mamba_d_state", 16)));
    w.add_u32(p + "ssm.time_step_rank", uint32_t(c.get_int_or("mamba_dt_rank", (hidden + 15) / 16)));
    w.add_f32(p + "attention.layer_norm_rms_epsilon", float(c.get_float_or("rms_norm_eps", 1e-6)));
    w.add_u32(p + "expert_count", uint32_t(experts));
    w.add_u32(p + "expert_used_count", uint32_t(c.get_int_or("num_experts_per_tok", 2)));
    return;
  }
  // LFM2's dense width is adjusted from intermediate_size (block_auto_adjust_ff_dim): its w1 holds the outcome.
  int64_t ff = c.get_int("intermediate_size");
  if (arch == "lfm2") {
    const std::string w1 = "model.layers.0.feed_forward.w1.weight";
    if (!files.has(w1)) throw LoadError(files.config().source() + ": tensor '" + w1 + "' is missing");
    ff = files.stored(w1).shape.at(0);
  }
  w.add_u32(p + "feed_forward_length", uint32_t(ff));
  const int64_t head_dim = c.get_int_or("head_dim", hidden / heads);
  w.add_f32(p + "rope.freq_base", float(read_rope(c, head_dim, kWholeHead).theta));
  w.add_f32(p + "attention.layer_norm_rms_epsilon", float(c.get_float_or("norm_eps", 1e-5)));
  w.add_u32(p + "vocab_size", uint32_t(c.get_int("vocab_size")));
  w.add_u32(p + "shortconv.l_cache", uint32_t(c.get_int_or("conv_L_cache", 3)));
  if (arch == "lfm2moe") {
    if (!c.get_bool_or("norm_topk_prob", true))
      throw LoadError(c.source() + ": key 'norm_topk_prob': GGUF (llama.cpp's lfm2moe) always renormalizes");
    w.add_u32(p + "expert_count", uint32_t(experts));
    w.add_u32(p + "expert_used_count", uint32_t(c.get_int_or("num_experts_per_tok", 4)));
    w.add_u32(p + "expert_feed_forward_length", uint32_t(c.get_int("moe_intermediate_size")));
    w.add_u32(p + "leading_dense_block_count", uint32_t(c.get_int_or("num_dense_layers", 2)));
    w.add_u32(p + "expert_gating_func", 2);  // sigmoid
    const double scale = c.get_float_or("routed_scaling_factor", 1.0);
    if (scale != 1.0) w.add_f32(p + "expert_weights_scale", float(scale));
  }
}

bool plan_ssm_edit(const ModelFiles& files, const std::string& name, TensorPlan& p) {
  if (name.ends_with(".A_log")) {
    p.edit = ValueEdit::neg_exp;
    p.type = QuantType::F32;
    return true;
  }
  if (!name.ends_with(".conv1d.weight") && !name.ends_with(".conv.conv.weight")) return false;
  const std::vector<int64_t> shape = files.stored(name).shape;
  if (shape.size() != 3 || shape[1] != 1)
    throw LoadError(files.source(name) + ": tensor '" + name + "': expected a [channels, 1, kernel] convolution");
  p.shape = {shape[0], shape[2]};
  p.type = QuantType::F32;
  return true;
}

std::vector<TensorPlan> plan_conv_hybrid(const ModelFiles& files, const Config& c, const std::string& arch, bool tied) {
  const ExpertTensors& expert_tensors = arch == "jamba" ? kJambaExperts : kLfm2Experts;
  std::vector<TensorPlan> plans;
  std::vector<std::string> expert_names;
  for (const std::string& name : files.names()) {
    if (name == "lm_head.weight" && tied) continue;
    if (expert_tensor_layer(name, expert_tensors)) {  // stacked after the loop
      expert_names.push_back(name);
      continue;
    }
    const auto gguf_name = gguf_hybrid_tensor_name(arch, name);
    if (!gguf_name) throw LoadError(files.source(name) + ": tensor '" + name + "' has no GGUF counterpart for " + arch);
    TensorPlan p;
    p.gguf_name = *gguf_name;
    p.sources = {name};
    p.shape = files.stored(name).shape;
    if (plan_ssm_edit(files, name, p)) {  // A and the conv kernels, edited and held F32
    } else if (name.ends_with(".feed_forward.gate.weight") || name.ends_with(".feed_forward.router.weight")) {
      p.type = QuantType::F32;  // the routers
    }
    plans.push_back(std::move(p));
  }
  const int64_t experts = c.get_int_or("num_experts", c.get_int_or("num_local_experts", 0));
  std::vector<TensorPlan> stacked = plan_stacked_experts(files, expert_names, experts, expert_tensors);
  plans.insert(plans.end(), stacked.begin(), stacked.end());
  return plans;
}

}  // namespace attnzoo
