#include "convert/gguf_export_pattern_hybrids.h"

#include <string_view>

#include "core/checked.h"
#include "loader/gguf_hybrids.h"
#include "loader/load_error.h"
#include "models/decoder.h"
#include "models/hf_config.h"
#include "models/hybrid_stack.h"

namespace attnzoo {
namespace {

bool is_nemotron(const std::string& arch) { return arch.starts_with("nemotron_h"); }

// Nemotron 3's ungated relu² experts, backbone.layers.<i>.mixer.experts.<e>.{up,down}_proj
const ExpertTensors kNemotronExperts{"mixer", {{"up_proj", "ffn_up_exps"}, {"down_proj", "ffn_down_exps"}},
                                     "backbone.layers."};

std::vector<HybridLayer> layers_of(const Config& c, const std::string& arch) {
  return is_nemotron(arch) ? nemotron_h_layers(c) : granite_hybrid_layers(c, c.get_int("num_hidden_layers"), HybridFfn::dense);
}

// The Mamba-2 sizes under the family's key names: (heads, head_dim, groups, state, conv).
struct SsmSizes {
  int64_t heads, head_dim, groups, state, conv;
};

SsmSizes ssm_sizes(const Config& c, const std::string& arch) {
  const int64_t hidden = c.get_int("hidden_size");
  const Mamba2Keys k = is_nemotron(arch) ? Mamba2Keys{"mamba_num_heads", "mamba_head_dim", "n_groups", "ssm_state_size",
                                                      "conv_kernel", "expand", "mamba_hidden_act"}
                                         : Mamba2Keys{"mamba_n_heads", "mamba_d_head", "mamba_n_groups", "mamba_d_state",
                                                      "mamba_d_conv", "mamba_expand", "hidden_act"};
  const Mamba2MixerConfig mc = read_hybrid_mamba2(c, hidden, 1e-5f, k);
  return {mc.num_heads, mc.head_dim, mc.n_groups, mc.state_size, mc.conv_kernel};
}

bool is_bamba(const Config& root) { return root.get_string_list("architectures")[0] == "BambaForCausalLM"; }

bool uses_rope(const Config& root, const Config& c) {
  return is_bamba(root) || c.get_string_or("position_embedding_type", "") == "rope";
}

// "model.layers.N." / "backbone.layers.N." -> ("blk.N.", rest); empty strings outside the layers.
std::pair<std::string, std::string> split_layer(const std::string& name, std::string_view prefix) {
  if (!name.starts_with(prefix)) return {};
  const size_t dot = name.find('.', prefix.size());
  if (dot == std::string::npos) return {};
  return {"blk." + name.substr(prefix.size(), dot - prefix.size()) + ".", name.substr(dot + 1)};
}

// Granite's / Bamba's feed-forward tensors: the split halves of input_linear, or a name of their own.
bool plan_granite_ffn(const ModelFiles& files, const std::string& name, const std::string& blk, const std::string& rest,
                      bool experts, std::vector<TensorPlan>& plans) {
  TensorPlan p;
  p.sources = {name};
  p.shape = files.stored(name).shape;
  const std::string sh = experts ? "_shexp" : "";
  if (rest == "shared_mlp.input_linear.weight" || rest == "block_sparse_moe.input_linear.weight") {
    const bool stacked = rest.starts_with("block_sparse_moe");
    const std::vector<int64_t>& s = p.shape;
    if (s.size() != (stacked ? 3u : 2u) || s[s.size() - 2] % 2 != 0)
      throw LoadError(files.source(name) + ": tensor '" + name + "': expected " +
                      (stacked ? "[experts, 2 * width, hidden]" : "[2 * width, hidden]"));
    const int64_t n = stacked ? s[0] : 1, half = s[s.size() - 2] / 2;
    for (const char* part : {"gate", "up"}) {
      TensorPlan q = p;
      q.gguf_name = blk + "ffn_" + part + (stacked ? "_exps" : sh) + ".weight";
      q.shape[q.shape.size() - 2] = half;
      const int64_t offset = std::string_view(part) == "up" ? half : 0;
      for (int64_t e = 0; e < n; ++e)
        for (int64_t r = 0; r < half; ++r) q.rows.push_back(e * 2 * half + offset + r);
      plans.push_back(std::move(q));
    }
    return true;
  }
  if (rest == "shared_mlp.output_linear.weight") {
    p.gguf_name = blk + "ffn_down" + sh + ".weight";
  } else if (rest == "block_sparse_moe.output_linear.weight") {
    p.gguf_name = blk + "ffn_down_exps.weight";
  } else if (rest == "block_sparse_moe.router.layer.weight") {
    p.gguf_name = blk + "ffn_gate_inp.weight";
    p.type = QuantType::F32;  // the router, as the converter keeps it
  } else if (rest.starts_with("feed_forward.") && rest.ends_with("_proj.weight")) {  // Bamba
    p.gguf_name = blk + "ffn_" + rest.substr(13, rest.size() - 13 - 12) + ".weight";
  } else {
    return false;
  }
  plans.push_back(std::move(p));
  return true;
}

}  // namespace

std::optional<std::string> pattern_hybrid_arch(const Config& root) {
  const std::string hf_class = root.has("architectures") ? root.get_string_list("architectures").at(0) : "";
  if (hf_class == "NemotronHForCausalLM") {
    bool dense = false, moe = false;
    for (const HybridLayer& l : nemotron_h_layers(root.text_config())) {
      dense = dense || l.ffn == HybridFfn::dense;
      moe = moe || l.ffn == HybridFfn::moe;
    }
    if (dense && moe)
      throw LoadError(root.source() + ": key 'hybrid_override_pattern': MLP ('-') and MoE ('E') layers together "
                      "cannot be written (llama.cpp's nemotron_h_moe reads every feed-forward layer as MoE)");
    return moe ? "nemotron_h_moe" : "nemotron_h";
  }
  if (hf_class == "GraniteMoeHybridForCausalLM" || hf_class == "BambaForCausalLM") return "granitehybrid";
  return std::nullopt;
}

void add_pattern_hybrid_hparams(GgufWriter& w, const Config& root, const std::string& arch) {
  const Config c = root.text_config();
  const std::string p = arch + ".";
  const std::vector<HybridLayer> layers = layers_of(c, arch);
  const int64_t heads = c.get_int("num_attention_heads"), kv = c.get_int_or("num_key_value_heads", heads);
  const int64_t hidden = c.get_int("hidden_size");
  const int64_t head_dim = c.get_int_or("head_dim", hidden / heads);
  std::vector<int32_t> kv_per_layer, ff_per_layer;
  for (const HybridLayer& l : layers) {
    kv_per_layer.push_back(l.mixer == HybridMixer::attention ? int32_t(kv) : 0);
    ff_per_layer.push_back(l.ffn == HybridFfn::dense  ? int32_t(c.get_int("intermediate_size"))
                           : l.ffn == HybridFfn::moe ? int32_t(c.get_int("moe_intermediate_size"))
                                                     : 0);
  }
  w.add_u32(p + "block_count", uint32_t(layers.size()));
  if (c.has("max_position_embeddings")) w.add_u32(p + "context_length", uint32_t(c.get_int("max_position_embeddings")));
  w.add_u32(p + "embedding_length", uint32_t(hidden));
  if (is_nemotron(arch))
    w.add_i32_array(p + "feed_forward_length", ff_per_layer);
  else
    w.add_u32(p + "feed_forward_length", uint32_t(c.get_int("intermediate_size")));
  w.add_u32(p + "attention.head_count", uint32_t(heads));
  w.add_i32_array(p + "attention.head_count_kv", kv_per_layer);
  w.add_u32(p + "attention.key_length", uint32_t(head_dim));
  w.add_u32(p + "attention.value_length", uint32_t(head_dim));
  w.add_f32(p + "attention.layer_norm_rms_epsilon",
            float(is_nemotron(arch) ? c.get_float_or("layer_norm_epsilon", 1e-5) : c.get_float_or("rms_norm_eps", 1e-6)));
  const SsmSizes s = ssm_sizes(c, arch);
  w.add_u32(p + "ssm.conv_kernel", uint32_t(s.conv));
  w.add_u32(p + "ssm.state_size", uint32_t(s.state));
  w.add_u32(p + "ssm.group_count", uint32_t(s.groups));
  w.add_u32(p + "ssm.inner_size", uint32_t(checked_mul(s.heads, s.head_dim, "Mamba heads * head dim")));
  w.add_u32(p + "ssm.time_step_rank", uint32_t(s.heads));
  if (arch == "nemotron_h_moe") {
    w.add_u32(p + "expert_count", uint32_t(c.get_int("n_routed_experts")));
    w.add_u32(p + "expert_used_count", uint32_t(c.get_int("num_experts_per_tok")));
    w.add_u32(p + "expert_feed_forward_length", uint32_t(c.get_int("moe_intermediate_size")));
    w.add_u32(p + "expert_shared_feed_forward_length", uint32_t(c.get_int("moe_shared_expert_intermediate_size")));
    w.add_u32(p + "expert_shared_count", uint32_t(c.get_int_or("n_shared_experts", 1)));
    w.add_bool(p + "expert_weights_norm", c.get_bool_or("norm_topk_prob", true));
    w.add_f32(p + "expert_weights_scale", float(c.get_float_or("routed_scaling_factor", 1.0)));
    w.add_u32(p + "expert_group_count", uint32_t(c.get_int_or("n_group", 1)));
    w.add_u32(p + "expert_group_used_count", uint32_t(c.get_int_or("topk_group", 1)));
  }
  if (is_nemotron(arch)) return;
  const bool rope = uses_rope(root, c);
  w.add_bool(p + "rope.scaling.finetuned", rope);
  if (rope) {
    const RopeConfig r = read_rope(c, head_dim, rotary_share(is_bamba(root) ? "bamba" : "granitemoehybrid"));
    w.add_f32(p + "rope.freq_base", float(r.theta));
    w.add_u32(p + "rope.dimension_count", uint32_t(r.rotary_dim ? r.rotary_dim : head_dim));
  }
  if (is_bamba(root)) return;
  w.add_f32(p + "embedding_scale", float(c.get_float_or("embedding_multiplier", 1.0)));
  w.add_f32(p + "residual_scale", float(c.get_float_or("residual_multiplier", 1.0)));
  w.add_f32(p + "logit_scale", float(c.get_float_or("logits_scaling", 1.0)));
  w.add_f32(p + "attention.scale", float(c.get_float_or("attention_multiplier", 1.0)));
  if (c.has("shared_intermediate_size"))
    w.add_u32(p + "expert_shared_feed_forward_length", uint32_t(c.get_int("shared_intermediate_size")));
  if (const int64_t experts = c.get_int_or("num_local_experts", 0); experts > 0) {
    w.add_u32(p + "expert_count", uint32_t(experts));
    w.add_u32(p + "expert_used_count", uint32_t(c.get_int("num_experts_per_tok")));
  }
}

std::vector<TensorPlan> plan_pattern_hybrid(const ModelFiles& files, const std::string& arch) {
  const Config& root = files.config();
  const Config c = root.text_config();
  const bool nemotron = is_nemotron(arch), bamba = !nemotron && is_bamba(root);
  const bool experts = !nemotron && !bamba && c.get_int_or("num_local_experts", 0) > 0;
  // Nemotron-H keeps its lm_head whatever tie_word_embeddings says (transformers ties nothing there)
  const bool tied = !nemotron && config_ties_embeddings(root, c, false);
  const int64_t heads = c.get_int("num_attention_heads"), kv = c.get_int_or("num_key_value_heads", heads);
  const SsmSizes s = ssm_sizes(c, arch);
  const std::string_view layer_prefix = nemotron ? "backbone.layers." : "model.layers.";
  std::vector<TensorPlan> plans;
  std::vector<std::string> expert_names;
  for (const std::string& name : files.names()) {
    if (name == "lm_head.weight" && tied) continue;
    const auto [blk, rest] = split_layer(name, layer_prefix);
    if (!nemotron && !blk.empty() && plan_granite_ffn(files, name, blk, rest, experts, plans)) continue;
    if (nemotron && expert_tensor_layer(name, kNemotronExperts)) {  // stacked after the loop
      expert_names.push_back(name);
      continue;
    }
    std::string renamed = name;
    if (bamba && name == "model.final_layernorm.weight") renamed = "model.norm.weight";
    if (bamba && rest == "pre_ff_layernorm.weight") renamed = std::string(layer_prefix) + blk.substr(4) + "post_attention_layernorm.weight";
    const auto gguf_name = gguf_hybrid_tensor_name(arch, renamed);
    if (!gguf_name) throw LoadError(files.source(name) + ": tensor '" + name + "' has no GGUF counterpart for " + arch);
    const StoredTensor st = files.stored(name);
    TensorPlan p;
    p.gguf_name = *gguf_name;
    p.sources = {name};
    p.shape = st.shape;
    const std::string mixer = nemotron ? "mixer." : "mamba.";
    if (rest == mixer + "A_log" || rest == mixer + "D") {
      p.shape = {st.numel(), 1};
      if (rest.ends_with("A_log")) p.edit = ValueEdit::neg_exp;
      p.type = QuantType::F32;
    } else if (rest == mixer + "norm.weight") {
      p.shape = {s.groups, st.numel() / s.groups};
      p.type = QuantType::F32;
    } else if (rest == mixer + "conv1d.weight") {
      if (st.shape.size() != 3 || st.shape[1] != 1)
        throw LoadError(files.source(name) + ": tensor '" + name + "': expected a [channels, 1, kernel] convolution");
      p.shape = {st.shape[0], st.shape[2]};
      p.type = QuantType::F32;
    } else if (rest == "mixer.gate.weight" || rest == "mixer.gate.e_score_correction_bias") {
      p.type = QuantType::F32;  // the router and its bias, as transformers keeps them
    } else if (rest.ends_with("q_proj.weight") || rest.ends_with("q_proj.bias")) {
      p.permute_heads = heads;
    } else if (rest.ends_with("k_proj.weight") || rest.ends_with("k_proj.bias")) {
      p.permute_heads = kv;
    }
    plans.push_back(std::move(p));
  }
  if (!expert_names.empty()) {
    std::vector<TensorPlan> stacked = plan_stacked_experts(files, expert_names, c.get_int("n_routed_experts"),
                                                           kNemotronExperts);
    plans.insert(plans.end(), stacked.begin(), stacked.end());
  }
  return plans;
}

}  // namespace attnzoo
