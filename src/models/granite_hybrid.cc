// GraniteMoeHybridForCausalLM (Granite 4.0-H) and BambaForCausalLM on the pattern-driven hybrid stack
// (hybrid_stack.h): each layer a Mamba-2 mixer or softmax attention (layer_types / attn_layer_indices), then a
// feed-forward.
//   Granite  embeddings * embedding_multiplier; every sublayer's output * residual_multiplier before the residual
//            add; attention scores * attention_multiplier (in place of head_dim^-0.5); RoPE only with
//            position_embedding_type "rope"; logits / logits_scaling. Feed-forward: a shared SwiGLU MLP
//            (shared_mlp.input_linear = [gate; up]) plus, with num_local_experts > 0, a MoE whose router softmaxes
//            the top-k logits (the top-k of the softmax, renormalized) over SwiGLU experts stacked in
//            block_sparse_moe.input_linear [E, 2I, H] / output_linear [E, H, I]. A GGUF of it reads with split
//            gate_proj / up_proj names (loader/gguf_pattern_hybrids.h).
//   Bamba    RoPE on half of each head (transformers fixes partial_rotary_factor at 0.5), a SwiGLU
//            feed_forward, pre_ff_layernorm and model.final_layernorm; no multipliers.
#include <cmath>

#include "layers/mlp.h"
#include "layers/moe.h"
#include "loader/load_error.h"
#include "models/decoder.h"
#include "models/describe.h"
#include "models/hf_config.h"
#include "models/hybrid_stack.h"
#include "models/mamba2_from_checkpoint.h"
#include "models/registry.h"

namespace attnzoo {
namespace {

constexpr Mamba2Keys kGraniteMamba{"mamba_n_heads", "mamba_d_head", "mamba_n_groups", "mamba_d_state",
                                   "mamba_d_conv", "mamba_expand", "hidden_act"};

// Everything the builder reads from config.json, shared with describe_granite_hybrid.
struct GraniteShape {
  ModelInfo info;
  bool bamba = false;
  std::vector<HybridLayer> layers;
  float eps = 1e-6f;
  Mamba2MixerConfig mc;
  AttentionConfig ac;
  RopeConfig rope;
  int64_t experts = 0, top_k = 1, shared = 0;  // shared: the shared (Granite) or only (dense) MLP's width
  DecoderOptions options;
};

GraniteShape read_shape(const Config& root, const Config& c, const LoadOptions& options) {
  GraniteShape s;
  s.bamba = root.get_string_list("architectures")[0] == "BambaForCausalLM";
  ModelInfo& info = s.info = read_dense_model_info(root, c, options, s.bamba ? "bamba" : "granitemoehybrid");
  const int64_t H = info.hidden_size, D = info.head_dim;
  s.experts = s.bamba ? 0 : c.get_int_or("num_local_experts", 0);
  s.layers = granite_hybrid_layers(c, info.num_layers, s.experts > 0 ? HybridFfn::moe : HybridFfn::dense);
  s.eps = float(c.get_float_or("rms_norm_eps", s.bamba ? 1e-5 : 1e-6));
  s.mc = read_hybrid_mamba2(c, H, s.eps, kGraniteMamba);
  s.ac = model_attention_config(info, 0, options);
  if (s.bamba) {
    s.rope = read_rope(c, D, rotary_share("bamba"));
    s.shared = info.intermediate_size;
  } else {
    if (c.get_string_or("position_embedding_type", "") == "rope") {
      s.rope = read_rope(c, D, rotary_share("granitemoehybrid"));
    } else {
      s.rope.head_dim = D;
      s.rope.type = "none";
    }
    s.ac.scale = float(c.get_float_or("attention_multiplier", 1.0));
    s.shared = c.get_int_or("shared_intermediate_size", 1024);
    s.options.embedding_scale = float(c.get_float_or("embedding_multiplier", 1.0));
    s.options.residual_scale = float(c.get_float_or("residual_multiplier", 1.0));
    const double logits_scaling = c.get_float_or("logits_scaling", 1.0);
    if (!(logits_scaling > 0) || !std::isfinite(logits_scaling))
      throw LoadError(c.source() + ": key 'logits_scaling': must be positive");
    s.options.logits_scale = float(1.0 / logits_scaling);
  }
  if (s.experts < 0 || s.shared <= 0)
    throw LoadError(c.source() + ": keys 'num_local_experts' / 'shared_intermediate_size': must be >= 0 / positive");
  if (s.experts > 0) {
    s.top_k = c.get_int_or("num_experts_per_tok", 2);
    if (s.top_k <= 0 || s.top_k > s.experts)
      throw LoadError(c.source() + ": key 'num_experts_per_tok': must be in [1, num_local_experts]");
  }
  return s;
}

}  // namespace

std::unique_ptr<Model> build_granite_hybrid(ModelFiles files, const LoadOptions& options) {
  const Config c = files.config().text_config();
  const GraniteShape s = read_shape(files.config(), c, options);
  ModelInfo info = s.info;
  const int64_t H = info.hidden_size, I = info.intermediate_size, S = s.shared, E = s.experts;
  const Activation act = parse_activation(c.get_string_or("hidden_act", "silu"));
  count_checkpoint(files, info);
  WeightBytes owned;
  const DType store = options.weights;
  const Rope rope(s.rope);
  auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    return load_linear(files, name, out, in, store, &owned);
  };
  // A SwiGLU MLP stored with gate_proj / up_proj / `down` (Bamba, or a GGUF of Granite) or with the two halves of
  // `fused` [2 * width, H] (Granite's input_linear).
  auto swiglu = [&](const std::string& m, const std::string& fused, const std::string& down, int64_t width) {
    if (files.has(m + fused + ".weight"))
      return GatedMlp(load_linear_rows(files, m + fused, 2 * width, 0, width, H, store, &owned),
                      load_linear_rows(files, m + fused, 2 * width, width, width, H, store, &owned),
                      linear(m + down, H, width), act, m);
    return GatedMlp(linear(m + ".gate_proj", width, H), linear(m + ".up_proj", width, H), linear(m + down, H, width),
                    act, m);
  };

  HybridStackParts parts;
  if (s.bamba) {
    parts.ffn_norm = ".pre_ff_layernorm";
    parts.final_norm = "model.final_layernorm";
  }
  parts.norm_eps = s.eps;
  parts.options = s.options;
  parts.mixer = [&](HybridMixer kind, int64_t, const std::string& p) -> std::unique_ptr<SequenceMixer> {
    if (kind == HybridMixer::mamba2) return load_mamba2_mixer(files, s.mc, p + ".mamba", store, &owned);
    return load_hybrid_attention(files, s.ac, p + ".self_attn", rope, store, &owned);
  };
  parts.ffn = [&](HybridFfn kind, int64_t, const std::string& p) -> std::unique_ptr<FeedForward> {
    if (s.bamba) return std::make_unique<GatedMlp>(swiglu(p + ".feed_forward", "", ".down_proj", S));
    GatedMlp shared = swiglu(p + ".shared_mlp", ".input_linear", ".output_linear", S);
    if (kind != HybridFfn::moe) return std::make_unique<GatedMlp>(std::move(shared));
    const std::string m = p + ".block_sparse_moe";
    std::vector<GatedMlp> experts;
    const bool stacked = files.has(m + ".input_linear.weight");
    for (int64_t e = 0; e < E; ++e) {
      const std::string x = m + ".experts." + std::to_string(e);
      if (!stacked) {
        experts.push_back(swiglu(x, "", ".down_proj", I));
        continue;
      }
      const std::string in = m + ".input_linear.weight", out = m + ".output_linear.weight";
      experts.emplace_back(load_stacked_rows(files, in, E, 2 * I, H, e, 0, I, store, &owned),
                           load_stacked_rows(files, in, E, 2 * I, H, e, I, I, store, &owned),
                           load_stacked_rows(files, out, E, H, I, e, 0, H, store, &owned), act, x);
    }
    MoeConfig mc;
    mc.top_k = s.top_k;
    mc.normalize_top_k = true;  // a softmax over the top-k logits
    return std::make_unique<SparseMoe>(mc, linear(m + ".router.layer", E, H), std::move(experts), std::move(shared),
                                       std::nullopt, m);
  };
  return assemble_hybrid_stack(std::move(files), std::move(info), s.layers, parts, store, owned);
}

ModelDescription describe_granite_hybrid(const Config& root, const LoadOptions& options) {
  const Config c = root.text_config();
  const GraniteShape s = read_shape(root, c, options);
  ModelDescription d;
  d.info = s.info;
  d.attention = s.ac;
  d.info.layers = hybrid_layer_infos(s.layers, s.ac, s.mc);
  d.info.tied_embeddings = config_ties_embeddings(root, c, false);
  const int64_t H = d.info.hidden_size, I = d.info.intermediate_size, E = s.experts;
  const bool mlp_bias = s.bamba && c.get_bool_or("mlp_bias", false);
  auto swiglu = [&](int64_t width) { return Checked(2) * linear_params(width, H, mlp_bias) + linear_params(H, width, mlp_bias); };
  Checked params = Checked(d.info.vocab_size) * H * (d.info.tied_embeddings ? 1 : 2) + H;
  for (const HybridLayer& l : s.layers) {
    params += Checked(2) * H + swiglu(s.shared);  // the two norms and the shared (Bamba: only) MLP
    if (l.mixer == HybridMixer::mamba2)
      params += mamba2_parameter_count(s.mc, c.get_bool_or("mamba_proj_bias", false), c.get_bool_or("mamba_conv_bias", true));
    else
      params += attention_parameter_count(s.ac, c.get_bool_or("attention_bias", false));
    if (l.ffn == HybridFfn::moe) params += Checked(E) * H + Checked(E) * swiglu(I);
  }
  d.info.parameter_count = params.value();
  d.parameters_estimated = true;
  return d;
}

}  // namespace attnzoo
