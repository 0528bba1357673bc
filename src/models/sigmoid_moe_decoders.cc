// The sigmoid-routed MoE decoders with a routing bias, as transformers runs them: Llama's block layout
// (input_layernorm, post_attention_layernorm) around softmax attention with RoPE on the first partial_rotary_factor of
// each head (half-rotation layout) and DeepSeek-V3's router (layers/deepseek_moe.h: sigmoid scores, the
// e_score_correction_bias steering only the choice, the chosen unbiased scores as weights).
//   Glm4MoeForCausalLM (GLM-4.5, GLM-4.5-Air, GLM-4.6)
//     attention  q / k / v biased (attention_bias), per-head q / k RMSNorms when use_qk_norm, o_proj unbiased;
//                partial_rotary_factor defaults to 0.5 (unlike GLM-4-0414's interleaved pairs, the half layout)
//     ffn        a dense gated MLP in the first first_k_dense_replace layers, then the MoE under mlp.* with
//                n_group / topk_group, norm_topk_prob, routed_scaling_factor and n_shared_experts shared experts
//     The release appends num_nextn_predict_layers multi-token-prediction layers as model.layers.<num_hidden_layers..>;
//     they only draft tokens for speculative decoding, so plain decoding never reads them (transformers ignores them
//     at load, llama.cpp and vLLM skip them in the graph).
//   MiniMaxM2ForCausalLM (MiniMax-M2, M2.1)
//     attention  unbiased; q and k RMS-normed across all heads at once (q_norm [num_heads * head_dim], k_norm
//                [num_kv_heads * head_dim], OLMo 2's form); the release gives the rotary width as rotary_dim
//     ffn        every layer a MoE of intermediate_size-wide experts under block_sparse_moe, its correction bias beside
//                the router (not in it), weights always renormalized, one group, no shared expert, scale 1. Experts
//                are read under Mixtral's names (w1 / w3 / w2) or, from a GGUF, gate_proj / up_proj / down_proj.
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

enum class QkNorm { none, per_head, across_heads };

// Everything the builders read from config.json, shared with the describers.
struct Shape {
  ModelInfo info;
  float eps = 1e-5f;
  Activation act = Activation::silu;
  RopeConfig rope;
  QkNorm qk_norm = QkNorm::none;
  bool attention_bias = false;
  bool minimax = false;     // MiniMax-M2's names (block_sparse_moe, its correction bias beside the router)
  int64_t first_dense = 0;  // leading layers with a dense MLP of intermediate_size
  const char* expert_inter_key = "moe_intermediate_size";
  DeepseekMoeShape moe;
};

// Whether the config names partial_rotary_factor anywhere read_rope looks for it.
bool names_partial_rotary(const Config& c) {
  return c.has("partial_rotary_factor") ||
         (c.has("rope_parameters") && c.sub("rope_parameters").has("partial_rotary_factor")) ||
         (c.has("rope_scaling") && c.sub("rope_scaling").has("partial_rotary_factor"));
}

Shape read_common(const Config& root, const Config& c, const LoadOptions& options, const char* model_type,
                  double eps) {
  Shape s;
  s.info = read_dense_model_info(root, c, options, model_type);
  s.eps = float(c.get_float_or("rms_norm_eps", eps));
  s.act = parse_activation(c.get_string_or("hidden_act", "silu"));
  s.rope = read_rope(c, s.info.head_dim, rotary_share(model_type));
  return s;
}

Shape read_glm4_moe(const Config& root, const LoadOptions& options) {
  const Config c = root.text_config();
  Shape s = read_common(root, c, options, "glm4_moe", 1e-5);
  s.qk_norm = c.get_bool_or("use_qk_norm", false) ? QkNorm::per_head : QkNorm::none;
  s.attention_bias = c.get_bool_or("attention_bias", false);
  s.first_dense = c.get_int_or("first_k_dense_replace", 1);
  s.moe = read_deepseek_moe_shape(c);
  if (s.moe.num_experts <= 0 || c.get_int_or("moe_intermediate_size", 0) <= 0)
    throw LoadError(c.source() + ": keys 'n_routed_experts' / 'moe_intermediate_size': must be positive");
  if (s.first_dense < 0) throw LoadError(c.source() + ": key 'first_k_dense_replace': must be >= 0");
  return s;
}

Shape read_minimax_m2(const Config& root, const LoadOptions& options) {
  const Config c = root.text_config();
  Shape s = read_common(root, c, options, "minimax_m2", 1e-6);
  // MiniMaxM2Config turns the release's rotary_dim into partial_rotary_factor when the config names none.
  if (!names_partial_rotary(c) && c.has("rotary_dim")) {
    s.rope.rotary_dim = c.get_int("rotary_dim");
    if (s.rope.rotary_dim <= 0 || s.rope.rotary_dim > s.info.head_dim)
      throw LoadError(c.source() + ": key 'rotary_dim': " + std::to_string(s.rope.rotary_dim) +
                      " is not within head_dim " + std::to_string(s.info.head_dim));
  }
  s.qk_norm = QkNorm::across_heads;
  s.minimax = true;
  s.expert_inter_key = "intermediate_size";
  s.moe.num_experts = c.get_int_or("num_local_experts", 0);
  s.moe.config.top_k = c.get_int_or("num_experts_per_tok", 1);
  s.moe.config.norm_topk_prob = true;  // transformers always renormalizes the chosen weights
  if (s.moe.num_experts <= 0) throw LoadError(c.source() + ": key 'num_local_experts': must be positive");
  return s;
}

std::unique_ptr<Model> build(ModelFiles files, const LoadOptions& options, const Shape& s) {
  const Config c = files.config().text_config();
  ModelInfo info = s.info;
  const int64_t H = info.hidden_size, D = info.head_dim;
  const int64_t qw = info.num_heads * D, kw = info.num_kv_heads * D;
  const bool across = s.qk_norm == QkNorm::across_heads;
  const Rope rope(s.rope);
  count_checkpoint(files, info);

  WeightBytes owned;
  auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    return load_linear(files, name, out, in, options.weights, &owned);
  };
  LlamaLayoutParts parts;
  parts.norm_eps = s.eps;
  parts.mixer = [&](int64_t, const std::string& p) -> std::unique_ptr<SequenceMixer> {
    const std::string a = p + ".self_attn";
    std::optional<RmsNorm> qn, kn;
    if (s.qk_norm != QkNorm::none) {
      qn.emplace(weight(files, a + ".q_norm.weight", {across ? qw : D}), s.eps, false, a + ".q_norm");
      kn.emplace(weight(files, a + ".k_norm.weight", {across ? kw : D}), s.eps, false, a + ".k_norm");
    }
    return std::make_unique<AttentionLayer>(model_attention_config(info, 0, options), linear(a + ".q_proj", qw, H),
                                            linear(a + ".k_proj", kw, H), linear(a + ".v_proj", kw, H),
                                            linear(a + ".o_proj", H, qw), std::move(qn), std::move(kn), rope, a);
  };
  static const GatedMlpNames kMixtralNames{".w1", ".w3", ".w2"};
  const int64_t expert_inter = c.get_int(s.expert_inter_key);
  parts.ffn = [&](int64_t i, const std::string& p) -> std::unique_ptr<FeedForward> {
    if (i < s.first_dense)
      return std::make_unique<GatedMlp>(load_gated_mlp(files, p + ".mlp", kGatedMlpProjNames, info.intermediate_size,
                                                       H, s.act, options.weights, &owned));
    if (!s.minimax)
      return load_deepseek_moe(files, s.moe, p + ".mlp", kGatedMlpProjNames, expert_inter, H, s.act, options.weights,
                               &owned);
    const std::string m = p + ".block_sparse_moe";
    const GatedMlpNames& names = files.has(m + ".experts.0.w1.weight") ? kMixtralNames : kGatedMlpProjNames;
    return load_deepseek_moe(files, s.moe, m, names, expert_inter, H, s.act, options.weights, &owned,
                             ".e_score_correction_bias");
  };
  return assemble_llama_layout(std::move(files), c, std::move(info), parts, options.weights, owned);
}

ModelDescription describe(const Config& root, const LoadOptions& options, const Shape& s) {
  const Config c = root.text_config();
  ModelDescription d;
  d.info = s.info;
  const int64_t H = d.info.hidden_size, V = d.info.vocab_size, D = d.info.head_dim;
  const int64_t qw = d.info.num_heads * D, kw = d.info.num_kv_heads * D;
  const Checked qk_norms = s.qk_norm == QkNorm::per_head       ? Checked(2) * D
                           : s.qk_norm == QkNorm::across_heads ? Checked(qw) + kw
                                                               : Checked(0);
  d.attention = model_attention_config(d.info, 0, options);
  d.info.tied_embeddings = config_ties_embeddings(root, c, false);
  Checked params = Checked(V) * H * (d.info.tied_embeddings ? 1 : 2) + H;
  for (int64_t i = 0; i < d.info.num_layers; ++i) {
    d.info.layers.push_back({AttentionLayer::kind_of(*d.attention), 0, AttentionLayer::spec(*d.attention)});
    // q / k / v (biased with attention_bias), o, the q / k norms and the two block norms
    params += linear_params(qw, H, s.attention_bias) + 2 * linear_params(kw, H, s.attention_bias) +
              linear_params(H, qw) + qk_norms + Checked(2) * H;
    params += deepseek_ffn_parameter_count(c, s.moe, i >= s.first_dense, H, s.expert_inter_key);
  }
  d.info.parameter_count = params.value();
  d.parameters_estimated = true;
  return d;
}

}  // namespace

std::unique_ptr<Model> build_glm4_moe(ModelFiles files, const LoadOptions& options) {
  const Shape s = read_glm4_moe(files.config(), options);
  return build(std::move(files), options, s);
}

std::unique_ptr<Model> build_minimax_m2(ModelFiles files, const LoadOptions& options) {
  const Shape s = read_minimax_m2(files.config(), options);
  return build(std::move(files), options, s);
}

ModelDescription describe_glm4_moe(const Config& root, const LoadOptions& options) {
  return describe(root, options, read_glm4_moe(root, options));
}

ModelDescription describe_minimax_m2(const Config& root, const LoadOptions& options) {
  return describe(root, options, read_minimax_m2(root, options));
}

}  // namespace attnzoo
