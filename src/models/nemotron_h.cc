// NemotronHForCausalLM (Nemotron-H, NVIDIA-Nemotron-Nano-v2): each layer is one sublayer behind its own RMSNorm,
// chosen by hybrid_override_pattern / layers_block_type (hybrid_stack.h): a Mamba-2 mixer (gated RMSNorm over
// n_groups groups), softmax attention without RoPE (positions come from the Mamba layers) or an ungated relu2 MLP,
// down(relu(up(x))^2). Tensors sit in Mamba's layout: backbone.embeddings, backbone.layers.<i>.{norm, mixer},
// backbone.norm_f, lm_head (transformers never ties it to the embedding: only a checkpoint without lm_head.weight
// reads as tied). Nemotron 3's MoE layers ("E") route as DeepSeek-V3 does (sigmoid scores, correction bias, groups)
// over ungated relu² experts mixer.experts.<e>.{up,down}_proj plus one shared relu² MLP mixer.shared_experts
// (NemotronHMoe); a latent projection (moe_latent_size) is refused.
#include <cmath>

#include "layers/activations.h"
#include "layers/deepseek_moe.h"
#include "layers/mlp.h"
#include "loader/load_error.h"
#include "models/decoder.h"
#include "models/describe.h"
#include "models/hybrid_stack.h"
#include "models/mamba2_from_checkpoint.h"
#include "models/registry.h"

namespace attnzoo {
namespace {

constexpr Mamba2Keys kNemotronMamba{"mamba_num_heads", "mamba_head_dim", "n_groups", "ssm_state_size",
                                    "conv_kernel", "expand", "mamba_hidden_act"};

// Everything the builder reads from config.json, shared with describe_nemotron_h.
struct NemotronHShape {
  ModelInfo info;
  std::vector<HybridLayer> layers;
  float eps = 1e-5f;
  Activation act = Activation::relu2;
  Mamba2MixerConfig mc;
  AttentionConfig ac;
  DeepseekMoeConfig moe;  // with experts > 0: the MoE layers'
  int64_t experts = 0, moe_inter = 0, shared_inter = 0;
};

NemotronHShape read_shape(const Config& root, const Config& c, const LoadOptions& options) {
  NemotronHShape s;
  s.layers = nemotron_h_layers(c);
  bool any_moe = false;
  for (const HybridLayer& l : s.layers) any_moe = any_moe || l.ffn == HybridFfn::moe;
  if (any_moe) {
    if (c.has("moe_latent_size"))
      throw LoadError(c.source() + ": key 'moe_latent_size': MoE layers with a latent projection are not supported");
    s.experts = c.get_int("n_routed_experts");
    s.moe_inter = c.get_int("moe_intermediate_size");
    s.shared_inter = c.get_int("moe_shared_expert_intermediate_size");
    s.moe.top_k = c.get_int("num_experts_per_tok");
    s.moe.n_group = c.get_int_or("n_group", 1);
    s.moe.topk_group = c.get_int_or("topk_group", 1);
    s.moe.norm_topk_prob = c.get_bool_or("norm_topk_prob", true);
    s.moe.routed_scaling_factor = float(c.get_float_or("routed_scaling_factor", 1.0));
    if (s.experts <= 0 || s.moe_inter <= 0 || s.shared_inter <= 0)
      throw LoadError(c.source() + ": keys 'n_routed_experts' / 'moe_intermediate_size' / "
                                   "'moe_shared_expert_intermediate_size': must be positive");
  }
  // the pattern decides the layer count; num_hidden_layers is ignored, as transformers does
  ModelInfo& info = s.info = read_dense_model_info(root, c, options, "nemotron_h", int64_t(s.layers.size()));
  s.eps = float(c.get_float_or("layer_norm_epsilon", 1e-5));
  s.act = parse_activation(c.get_string_or("mlp_hidden_act", "relu2"));
  s.mc = read_hybrid_mamba2(c, info.hidden_size, s.eps, kNemotronMamba);
  // transformers' Nemotron-H clamps dt to (time_step_min, inf) and never reads time_step_limit.
  const double dt_min = c.get_float_or("time_step_min", 0.001);
  if (!(dt_min >= 0 && std::isfinite(dt_min)))
    throw LoadError(c.source() + ": key 'time_step_min': must be finite and >= 0");
  s.mc.dt_min = float(dt_min);
  s.mc.dt_max = INFINITY;
  s.ac = model_attention_config(info, 0, options);
  return s;
}

}  // namespace

std::unique_ptr<Model> build_nemotron_h(ModelFiles files, const LoadOptions& options) {
  const Config c = files.config().text_config();
  const NemotronHShape s = read_shape(files.config(), c, options);
  ModelInfo info = s.info;
  const int64_t H = info.hidden_size, I = info.intermediate_size;
  count_checkpoint(files, info);
  WeightBytes owned;
  RopeConfig nope;
  nope.head_dim = info.head_dim;
  nope.type = "none";
  const Rope rope(nope);

  HybridStackParts parts;
  parts.embed = files.has("backbone.embeddings.weight") ? "backbone.embeddings.weight" : "backbone.embedding.weight";
  parts.layer_prefix = "backbone.layers.";
  parts.input_norm = parts.ffn_norm = ".norm";  // one norm per layer, before its only sublayer
  parts.final_norm = "backbone.norm_f";
  parts.norm_eps = s.eps;
  parts.tie_by_config = false;
  parts.mixer = [&](HybridMixer kind, int64_t, const std::string& p) -> std::unique_ptr<SequenceMixer> {
    if (kind == HybridMixer::mamba2) return load_mamba2_mixer(files, s.mc, p + ".mixer", options.weights, &owned);
    return load_hybrid_attention(files, s.ac, p + ".mixer", rope, options.weights, &owned);
  };
  auto mlp = [&](const std::string& m, int64_t width) {
    return PlainMlp(load_linear(files, m + ".up_proj", width, H, options.weights, &owned),
                    load_linear(files, m + ".down_proj", H, width, options.weights, &owned), s.act, m);
  };
  parts.ffn = [&](HybridFfn kind, int64_t, const std::string& p) -> std::unique_ptr<FeedForward> {
    const std::string m = p + ".mixer";
    if (kind == HybridFfn::dense) return std::make_unique<PlainMlp>(mlp(m, I));
    std::vector<PlainMlp> experts;
    for (int64_t e = 0; e < s.experts; ++e) experts.push_back(mlp(m + ".experts." + std::to_string(e), s.moe_inter));
    // the router in f32, as transformers keeps it (a rounded router can pick other experts)
    return std::make_unique<NemotronHMoe>(s.moe, load_linear(files, m + ".gate", s.experts, H, DType::f32, &owned),
                                          optional_weight(files, m + ".gate.e_score_correction_bias", {s.experts}),
                                          std::move(experts), mlp(m + ".shared_experts", s.shared_inter), m);
  };
  return assemble_hybrid_stack(std::move(files), std::move(info), s.layers, parts, options.weights, owned);
}

ModelDescription describe_nemotron_h(const Config& root, const LoadOptions& options) {
  const Config c = root.text_config();
  const NemotronHShape s = read_shape(root, c, options);
  ModelDescription d;
  d.info = s.info;
  d.attention = s.ac;
  d.info.layers = hybrid_layer_infos(s.layers, s.ac, s.mc);
  d.info.tied_embeddings = false;  // transformers' class keeps its own lm_head even under tie_word_embeddings
  const int64_t H = d.info.hidden_size, E = s.experts;
  const bool mlp_bias = c.get_bool_or("mlp_bias", false);
  auto mlp = [&](int64_t width) { return linear_params(width, H, mlp_bias) + linear_params(H, width, mlp_bias); };
  Checked params = Checked(d.info.vocab_size) * H * 2 + H;  // embeddings, lm_head, norm_f
  for (const HybridLayer& l : s.layers) {
    params += H;  // the layer's norm
    if (l.mixer == HybridMixer::mamba2)
      params += mamba2_parameter_count(s.mc, c.get_bool_or("use_bias", false), c.get_bool_or("use_conv_bias", true));
    else if (l.mixer == HybridMixer::attention)
      params += attention_parameter_count(s.ac, false);  // transformers' class has no attention bias
    else if (l.ffn == HybridFfn::dense)
      params += mlp(d.info.intermediate_size);
    else  // router, its correction bias, the experts and the shared MLP
      params += Checked(E) * H + E + Checked(E) * mlp(s.moe_inter) + mlp(s.shared_inter);
  }
  d.info.parameter_count = params.value();
  d.parameters_estimated = true;
  return d;
}

}  // namespace attnzoo
