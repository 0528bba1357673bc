// JambaForCausalLM (AI21 Jamba) on the pattern-driven hybrid stack (hybrid_stack.h): a pre-norm stack of Mamba-1
// blocks with softmax attention every attn_layer_period-th layer from attn_layer_offset; the attention has no
// positional encoding at all (the Mamba layers carry order). Each block's feed-forward is a SwiGLU MLP, or on every
// expert_layer_period-th layer from expert_layer_offset a sparse MoE of num_experts SwiGLU experts: softmax over the
// router logits, the top k probabilities taken as they are (not renormalized). The Mamba mixers RMS-normalize
// dt_low, B and C with weights (dt_layernorm / b_layernorm / c_layernorm, eps rms_norm_eps). Tensors:
// model.layers.N.{input_layernorm, pre_ff_layernorm, mamba.*, self_attn.*, feed_forward.{gate,up,down}_proj |
// feed_forward.{router, experts.E.*}}, model.final_layernorm.
#include "layers/moe.h"
#include "loader/json.h"
#include "loader/load_error.h"
#include "models/decoder.h"
#include "models/describe.h"
#include "models/hybrid_stack.h"
#include "models/mamba_from_checkpoint.h"
#include "models/registry.h"

namespace attnzoo {
namespace {

struct JambaShape {
  ModelInfo info;
  std::vector<HybridLayer> layers;  // jamba_layers
  MambaMixerConfig mc;
  AttentionConfig ac;
  int64_t experts = 16, top_k = 2;
  bool proj_bias = false, conv_bias = true;
  float eps = 1e-6f;
};

JambaShape read_shape(const Config& root, const Config& c, const LoadOptions& options) {
  JambaShape s;
  s.info = read_dense_model_info(root, c, options, "jamba");
  const int64_t H = s.info.hidden_size;
  s.experts = c.get_int_or("num_experts", c.get_int_or("num_local_experts", 16));
  s.layers = jamba_layers(c, s.info.num_layers, s.experts);
  s.top_k = c.get_int_or("num_experts_per_tok", 2);
  if (s.experts <= 0) throw LoadError(c.source() + ": key 'num_experts': must be positive");
  MambaMixerConfig& mc = s.mc;
  mc.hidden = H;
  mc.inner = c.get_int_or("mamba_expand", 2) * H;
  mc.state_size = c.get_int_or("mamba_d_state", 16);
  mc.conv_kernel = c.get_int_or("mamba_d_conv", 4);
  const json::Value* rank = c.find("mamba_dt_rank");
  mc.dt_rank = !rank || (rank->is_string() && rank->as_string() == "auto") ? (H + 15) / 16
                                                                           : c.get_int("mamba_dt_rank");
  s.eps = float(c.get_float_or("rms_norm_eps", 1e-6));
  mc.bcdt_rms_norm = true;
  mc.mixer_rms_eps = s.eps;
  if (mc.inner <= 0 || mc.state_size <= 0 || mc.dt_rank <= 0 || mc.conv_kernel <= 0 || mc.conv_kernel > 16)
    throw LoadError(c.source() + ": keys 'mamba_expand' / 'mamba_d_state' / 'mamba_dt_rank' / 'mamba_d_conv': "
                                 "must be positive (mamba_d_conv at most 16)");
  s.proj_bias = c.get_bool_or("mamba_proj_bias", false);
  s.conv_bias = c.get_bool_or("mamba_conv_bias", true);
  const std::string act = c.get_string_or("hidden_act", "silu");
  if (act != "silu" && act != "swish")
    throw LoadError(c.source() + ": hidden_act '" + act + "' is not supported (Jamba's Mamba conv and MLPs use silu)");
  s.ac = model_attention_config(s.info, 0, options);
  return s;
}

}  // namespace

std::unique_ptr<Model> build_jamba(ModelFiles files, const LoadOptions& options) {
  const Config c = files.config().text_config();
  const JambaShape s = read_shape(files.config(), c, options);
  ModelInfo info = s.info;
  const int64_t H = info.hidden_size, I = info.intermediate_size;
  RopeConfig none;
  none.type = "none";
  none.head_dim = info.head_dim;
  const Rope nope(none);
  count_checkpoint(files, info);
  WeightBytes owned;
  const DType store = options.weights;
  auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    return load_linear(files, name, out, in, store, &owned);
  };
  auto gated_mlp = [&](const std::string& m) {
    return GatedMlp(linear(m + ".gate_proj", I, H), linear(m + ".up_proj", I, H), linear(m + ".down_proj", H, I),
                    Activation::silu, m);
  };

  HybridStackParts parts;
  parts.ffn_norm = ".pre_ff_layernorm";
  parts.final_norm = "model.final_layernorm";
  parts.norm_eps = s.eps;
  parts.mixer = [&](HybridMixer kind, int64_t, const std::string& p) -> std::unique_ptr<SequenceMixer> {
    if (kind == HybridMixer::attention)
      return load_hybrid_attention(files, s.ac, p + ".self_attn", nope, store, &owned);
    return load_mamba_mixer(files, s.mc, p + ".mamba", s.conv_bias, /*norm_weights=*/true, store, &owned);
  };
  parts.ffn = [&](HybridFfn kind, int64_t, const std::string& p) -> std::unique_ptr<FeedForward> {
    const std::string f = p + ".feed_forward";
    if (kind == HybridFfn::dense) return std::make_unique<GatedMlp>(gated_mlp(f));
    MoeConfig mc;
    mc.top_k = s.top_k;
    mc.normalize_top_k = false;
    std::vector<GatedMlp> experts;
    for (int64_t e = 0; e < s.experts; ++e) experts.push_back(gated_mlp(f + ".experts." + std::to_string(e)));
    return std::make_unique<SparseMoe>(mc, linear(f + ".router", s.experts, H), std::move(experts), std::nullopt,
                                       std::nullopt, f);
  };
  return assemble_hybrid_stack(std::move(files), std::move(info), s.layers, parts, store, owned);
}

ModelDescription describe_jamba(const Config& root, const LoadOptions& options) {
  const Config c = root.text_config();
  const JambaShape s = read_shape(root, c, options);
  ModelDescription d;
  d.info = s.info;
  d.attention = s.ac;
  d.info.tied_embeddings = config_ties_embeddings(root, c, false);
  const int64_t H = d.info.hidden_size, I = d.info.intermediate_size, V = d.info.vocab_size, E = s.mc.inner;
  const int64_t R = s.mc.dt_rank, N = s.mc.state_size;
  Checked params = Checked(V) * H * (d.info.tied_embeddings ? 1 : 2) + H;
  for (const HybridLayer& l : s.layers) {
    if (l.mixer == HybridMixer::attention) {
      d.info.layers.push_back({AttentionLayer::kind_of(s.ac), 0, AttentionLayer::spec(s.ac)});
      params += attention_parameter_count(s.ac, false);
    } else {
      d.info.layers.push_back({MambaMixer::kKind, 0, MambaMixer::spec(s.mc)});
      params += linear_params(2 * E, H, s.proj_bias) + Checked(E) * s.mc.conv_kernel + (s.conv_bias ? E : 0) +
                linear_params(R + 2 * N, E) + linear_params(E, R, true) + Checked(E) * N + E + R + 2 * N +
                linear_params(H, E, s.proj_bias);
    }
    // two block norms; the router and the experts, or the dense MLP
    params += Checked(2) * H + (l.ffn == HybridFfn::moe ? Checked(s.experts) * (Checked(H) + Checked(3) * I * H)
                                                        : Checked(3) * I * H);
  }
  d.info.parameter_count = params.value();
  d.parameters_estimated = true;
  return d;
}

}  // namespace attnzoo
