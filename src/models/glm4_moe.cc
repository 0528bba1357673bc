// Glm4MoeForCausalLM (GLM-4.5, GLM-4.5-Air, GLM-4.6), as transformers runs it: Llama's block layout
// (input_layernorm, post_attention_layernorm) around
//   attention  q / k / v biased (attention_bias), per-head q / k RMSNorms when use_qk_norm, RoPE on the first
//              partial_rotary_factor of each head (default 0.5) in half-rotation layout (unlike GLM-4-0414's
//              interleaved pairs), o_proj unbiased
//   ffn        a dense gated MLP in the first first_k_dense_replace layers, then DeepSeek-V3's MoE: sigmoid router
//              with e_score_correction_bias steering the choice, n_group / topk_group, norm_topk_prob,
//              routed_scaling_factor, n_shared_experts shared experts (layers/deepseek_moe.h)
// The release appends num_nextn_predict_layers multi-token-prediction layers as model.layers.<num_hidden_layers..>;
// they only draft tokens for speculative decoding, so plain decoding never reads them (transformers ignores them at
// load, llama.cpp and vLLM skip them in the graph).
#include "layers/activations.h"
#include "loader/load_error.h"
#include "models/decoder.h"
#include "models/deepseek_moe_from_checkpoint.h"
#include "models/describe.h"
#include "models/hf_config.h"
#include "models/llama_layout.h"
#include "models/registry.h"

namespace attnzoo {
namespace {

struct Glm4MoeShape {
  ModelInfo info;
  float eps = 1e-5f;
  Activation act = Activation::silu;
  RopeConfig rope;
  bool qk_norm = false, attention_bias = false;
  int64_t first_dense = 0;
  DeepseekMoeShape moe;
};

Glm4MoeShape read_shape(const Config& root, const LoadOptions& options) {
  const Config c = root.text_config();
  Glm4MoeShape s;
  s.info = read_dense_model_info(root, c, options, "glm4_moe");
  s.eps = float(c.get_float_or("rms_norm_eps", 1e-5));
  s.act = parse_activation(c.get_string_or("hidden_act", "silu"));
  s.rope = read_rope(c, s.info.head_dim);
  // Glm4MoeConfig fills in a partial_rotary_factor of 0.5 when the config names none.
  const bool named = c.has("partial_rotary_factor") ||
                     (c.has("rope_parameters") && c.sub("rope_parameters").has("partial_rotary_factor")) ||
                     (c.has("rope_scaling") && c.sub("rope_scaling").has("partial_rotary_factor"));
  if (!named) s.rope.rotary_dim = s.info.head_dim / 2;
  s.qk_norm = c.get_bool_or("use_qk_norm", false);
  s.attention_bias = c.get_bool_or("attention_bias", false);
  s.first_dense = c.get_int_or("first_k_dense_replace", 1);
  s.moe = read_deepseek_moe_shape(c);
  if (s.moe.num_experts <= 0 || c.get_int_or("moe_intermediate_size", 0) <= 0)
    throw LoadError(c.source() + ": keys 'n_routed_experts' / 'moe_intermediate_size': must be positive");
  if (s.first_dense < 0) throw LoadError(c.source() + ": key 'first_k_dense_replace': must be >= 0");
  return s;
}

}  // namespace

std::unique_ptr<Model> build_glm4_moe(ModelFiles files, const LoadOptions& options) {
  const Glm4MoeShape s = read_shape(files.config(), options);
  const Config c = files.config().text_config();
  ModelInfo info = s.info;
  const int64_t H = info.hidden_size, D = info.head_dim;
  const int64_t qw = info.num_heads * D, kw = info.num_kv_heads * D;
  const Rope rope(s.rope);
  count_checkpoint(files, info);

  uint64_t owned = 0;
  auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    return load_linear(files, name, out, in, options.weights, &owned);
  };
  LlamaLayoutParts parts;
  parts.norm_eps = s.eps;
  parts.mixer = [&](int64_t, const std::string& p) -> std::unique_ptr<SequenceMixer> {
    const std::string a = p + ".self_attn";
    std::optional<RmsNorm> qn, kn;
    if (s.qk_norm) {
      qn.emplace(weight(files, a + ".q_norm.weight", {D}), s.eps, false, a + ".q_norm");
      kn.emplace(weight(files, a + ".k_norm.weight", {D}), s.eps, false, a + ".k_norm");
    }
    return std::make_unique<AttentionLayer>(model_attention_config(info, 0, options), linear(a + ".q_proj", qw, H),
                                            linear(a + ".k_proj", kw, H), linear(a + ".v_proj", kw, H),
                                            linear(a + ".o_proj", H, qw), std::move(qn), std::move(kn), rope, a);
  };
  parts.ffn = [&](int64_t i, const std::string& p) -> std::unique_ptr<FeedForward> {
    const std::string m = p + ".mlp";
    if (i < s.first_dense)
      return std::make_unique<GatedMlp>(
          load_gated_mlp(files, m, kGatedMlpProjNames, info.intermediate_size, H, s.act, options.weights, &owned));
    return load_deepseek_moe(files, s.moe, m, kGatedMlpProjNames, c.get_int("moe_intermediate_size"), H, s.act,
                             options.weights, &owned);
  };
  return assemble_llama_layout(std::move(files), c, std::move(info), parts, options.weights, owned);
}

ModelDescription describe_glm4_moe(const Config& root, const LoadOptions& options) {
  const Glm4MoeShape s = read_shape(root, options);
  const Config c = root.text_config();
  ModelDescription d;
  d.info = s.info;
  const int64_t H = d.info.hidden_size, V = d.info.vocab_size, D = d.info.head_dim;
  const int64_t qw = d.info.num_heads * D, kw = d.info.num_kv_heads * D;
  d.attention = model_attention_config(d.info, 0, options);
  d.info.tied_embeddings = config_ties_embeddings(root, c, false);
  Checked params = Checked(V) * H * (d.info.tied_embeddings ? 1 : 2) + H;
  for (int64_t i = 0; i < d.info.num_layers; ++i) {
    d.info.layers.push_back({AttentionLayer::kind_of(*d.attention), 0, AttentionLayer::spec(*d.attention)});
    // q / k / v (biased with attention_bias), o, the optional per-head q / k norms and the two block norms
    params += linear_params(qw, H, s.attention_bias) + 2 * linear_params(kw, H, s.attention_bias) +
              linear_params(H, qw) + Checked(s.qk_norm ? 2 * D : 0) + Checked(2) * H;
    params += deepseek_ffn_parameter_count(c, s.moe, i >= s.first_dense, H);
  }
  d.info.parameter_count = params.value();
  d.parameters_estimated = true;
  return d;
}

}  // namespace attnzoo
