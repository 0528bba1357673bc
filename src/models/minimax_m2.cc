// MiniMaxM2ForCausalLM (MiniMax-M2, M2.1), as transformers runs it: Llama's block layout around
//   attention  unbiased q / k / v / o; q and k RMS-normed across all heads at once (q_norm [num_heads * head_dim],
//              k_norm [num_kv_heads * head_dim], OLMo 2's form) before RoPE on the first partial_rotary_factor of
//              each head (released configs give it as rotary_dim), half-rotation layout
//   ffn        every layer a MoE of intermediate_size-wide experts under block_sparse_moe: sigmoid router whose
//              e_score_correction_bias (beside the router, not in it) steers the top-k choice only, the chosen
//              sigmoid scores renormalized as weights; no shared expert. That is DeepSeek-V3's routing with one
//              group and a scale of 1 (layers/deepseek_moe.h)
// Experts are read under Mixtral's names (w1 / w3 / w2) or, from a GGUF, gate_proj / up_proj / down_proj.
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

struct MiniMaxM2Shape {
  ModelInfo info;
  float eps = 1e-6f;
  Activation act = Activation::silu;
  RopeConfig rope;
  DeepseekMoeShape moe;
};

MiniMaxM2Shape read_shape(const Config& root, const LoadOptions& options) {
  const Config c = root.text_config();
  MiniMaxM2Shape s;
  s.info = read_dense_model_info(root, c, options, "minimax_m2");
  s.eps = float(c.get_float_or("rms_norm_eps", 1e-6));
  s.act = parse_activation(c.get_string_or("hidden_act", "silu"));
  s.rope = read_rope(c, s.info.head_dim);
  // MiniMaxM2Config turns the release's rotary_dim into partial_rotary_factor when the config names none.
  const bool named = c.has("partial_rotary_factor") ||
                     (c.has("rope_parameters") && c.sub("rope_parameters").has("partial_rotary_factor"));
  if (!named && c.has("rotary_dim")) {
    s.rope.rotary_dim = c.get_int("rotary_dim");
    if (s.rope.rotary_dim <= 0 || s.rope.rotary_dim > s.info.head_dim)
      throw LoadError(c.source() + ": key 'rotary_dim': " + std::to_string(s.rope.rotary_dim) +
                      " is not within head_dim " + std::to_string(s.info.head_dim));
  }
  s.moe.num_experts = c.get_int_or("num_local_experts", 0);
  s.moe.config.top_k = c.get_int_or("num_experts_per_tok", 1);
  s.moe.config.norm_topk_prob = true;  // transformers always renormalizes the chosen weights
  if (s.moe.num_experts <= 0) throw LoadError(c.source() + ": key 'num_local_experts': must be positive");
  return s;
}

}  // namespace

std::unique_ptr<Model> build_minimax_m2(ModelFiles files, const LoadOptions& options) {
  const MiniMaxM2Shape s = read_shape(files.config(), options);
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
  auto norm = [&](const std::string& name, int64_t dim) {
    return RmsNorm(weight(files, name + ".weight", {dim}), s.eps, false, name);
  };
  LlamaLayoutParts parts;
  parts.norm_eps = s.eps;
  parts.mixer = [&](int64_t, const std::string& p) -> std::unique_ptr<SequenceMixer> {
    const std::string a = p + ".self_attn";
    return std::make_unique<AttentionLayer>(model_attention_config(info, 0, options), linear(a + ".q_proj", qw, H),
                                            linear(a + ".k_proj", kw, H), linear(a + ".v_proj", kw, H),
                                            linear(a + ".o_proj", H, qw), norm(a + ".q_norm", qw),
                                            norm(a + ".k_norm", kw), rope, a);
  };
  static const GatedMlpNames kMixtralNames{".w1", ".w3", ".w2"};
  parts.ffn = [&](int64_t, const std::string& p) -> std::unique_ptr<FeedForward> {
    const std::string m = p + ".block_sparse_moe";
    const GatedMlpNames& names = files.has(m + ".experts.0.w1.weight") ? kMixtralNames : kGatedMlpProjNames;
    return load_deepseek_moe(files, s.moe, m, names, info.intermediate_size, H, s.act, options.weights, &owned,
                             ".e_score_correction_bias");
  };
  return assemble_llama_layout(std::move(files), c, std::move(info), parts, options.weights, owned);
}

ModelDescription describe_minimax_m2(const Config& root, const LoadOptions& options) {
  const MiniMaxM2Shape s = read_shape(root, options);
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
    // q / k / v / o, the full-width q / k norms, the two block norms and the MoE
    params += linear_params(qw, H) + 2 * linear_params(kw, H) + linear_params(H, qw) + Checked(qw) + kw +
              Checked(2) * H;
    params += deepseek_ffn_parameter_count(c, s.moe, true, H, "intermediate_size");
  }
  d.info.parameter_count = params.value();
  d.parameters_estimated = true;
  return d;
}

}  // namespace attnzoo
