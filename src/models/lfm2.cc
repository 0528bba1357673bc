// Lfm2ForCausalLM (Liquid LFM2) on the pattern-driven hybrid stack (hybrid_stack.h): a pre-norm stack whose mixers
// are either gated short convolutions ("conv") or softmax attention with per-head RMSNorm on q and k
// ("full_attention"), chosen per layer by layer_types; every block has a SwiGLU feed-forward (w2(silu(w1 x) * w3 x)).
// The final norm is model.embedding_norm.
// Lfm2MoeForCausalLM (LFM2-MoE) keeps that feed-forward on its first num_dense_layers blocks; the others hold a
// sparse MoE of SwiGLU experts (feed_forward.experts.<e>.w1 / w3 / w2) routed by sigmoid scores plus
// feed_forward.expert_bias (the bias only steers the choice), top-k weights renormalized (+ 1e-6) and scaled by
// routed_scaling_factor: DeepSeek-V3's routing with one group.
#include "layers/activations.h"
#include "layers/deepseek_moe.h"
#include "layers/short_conv_mixer.h"
#include "loader/load_error.h"
#include "models/decoder.h"
#include "models/deepseek_moe_from_checkpoint.h"
#include "models/describe.h"
#include "models/hf_config.h"
#include "models/hybrid_stack.h"
#include "models/registry.h"

namespace attnzoo {
namespace {

const GatedMlpNames kLfm2MlpNames{".w1", ".w3", ".w2"};

// Shared by the builder and describe_lfm2: the shape fields (validated).
ModelInfo read_info(const Config& root, const Config& c, const LoadOptions& options) {
  ModelInfo info = read_model_info(root, c, options, "lfm2", /*with_intermediate=*/false);
  if (info.hidden_size <= 0 || info.num_layers <= 0 || info.num_heads <= 0 || info.num_kv_heads <= 0 ||
      info.head_dim <= 0 || info.vocab_size <= 0)
    throw LoadError(c.source() + ": sizes (hidden_size, num_hidden_layers, num_*_heads, vocab_size) must be positive");
  return info;
}

// LFM2-MoE's routing (DeepSeek-V3's with one group), and the first sparse layer: num_dense_layers (Lfm2: none).
struct Lfm2Moe {
  DeepseekMoeShape shape;
  int64_t first_sparse = -1, expert_inter = 0;
  explicit Lfm2Moe(const Config& c) {
    if (c.get_string_or("model_type", "") != "lfm2_moe") return;
    first_sparse = c.get_int_or("num_dense_layers", 2);
    expert_inter = c.get_int("moe_intermediate_size");
    shape.num_experts = c.get_int_or("num_experts", 32);
    if (first_sparse < 0 || expert_inter <= 0 || shape.num_experts <= 0)
      throw LoadError(c.source() + ": keys 'num_dense_layers' / 'moe_intermediate_size' / 'num_experts': "
                      "num_dense_layers must be >= 0, the others positive");
    shape.config.top_k = c.get_int_or("num_experts_per_tok", 4);
    shape.config.norm_topk_prob = c.get_bool_or("norm_topk_prob", true);
    shape.config.routed_scaling_factor = float(c.get_float_or("routed_scaling_factor", 1.0));
    shape.config.norm_epsilon = 1e-6;
  }
};

// The rows of a dense feed-forward's w1 (quantized or not): LFM2 adjusts the width from intermediate_size, the
// checkpoint states the outcome.
int64_t dense_width(const ModelFiles& files, const std::string& ffn) {
  const std::vector<int64_t> w1 = files.stored(ffn + ".w1.weight").shape;
  return w1.size() == 2 ? w1[0] : 0;
}

}  // namespace

std::unique_ptr<Model> build_lfm2(ModelFiles files, const LoadOptions& options) {
  const Config c = files.config().text_config();
  ModelInfo info = read_info(files.config(), c, options);
  const float eps = float(c.get_float_or("norm_eps", 1e-5));
  const int64_t H = info.hidden_size, D = info.head_dim, qw = info.num_heads * D, kw = info.num_kv_heads * D;
  const Lfm2Moe moe(c);
  const std::vector<HybridLayer> layers = lfm2_layers(c, info.num_layers, moe.first_sparse);
  const Rope rope(read_rope(c, D, kWholeHead));
  const AttentionConfig ac = model_attention_config(info, 0, options);
  // the first dense layer's width (every layer sparse: the experts')
  info.intermediate_size = moe.expert_inter;
  for (size_t i = 0; i < layers.size(); ++i)
    if (layers[i].ffn == HybridFfn::dense) {
      info.intermediate_size = dense_width(files, "model.layers." + std::to_string(i) + ".feed_forward");
      break;
    }
  count_checkpoint(files, info);
  WeightBytes owned;
  const DType store = options.weights;
  auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    return load_linear(files, name, out, in, store, &owned);
  };

  HybridStackParts parts;
  parts.input_norm = ".operator_norm";
  parts.ffn_norm = ".ffn_norm";
  parts.final_norm = "model.embedding_norm";
  parts.norm_eps = eps;
  parts.tie_fallback = c.get_bool_or("tie_embedding", true);
  parts.mixer = [&](HybridMixer kind, int64_t, const std::string& p) -> std::unique_ptr<SequenceMixer> {
    if (kind == HybridMixer::short_conv) {
      const std::string m = p + ".conv";
      const TensorView w = files.tensor(m + ".conv.weight");
      const int64_t L = w.ndim >= 1 ? w.shape[size_t(w.ndim - 1)] : 0;
      return std::make_unique<ShortConvMixer>(H, linear(m + ".in_proj", 3 * H, H), linear(m + ".out_proj", H, H),
                                              weight(files, m + ".conv.weight", {H, 1, L}),
                                              optional_weight(files, m + ".conv.bias", {H}), m);
    }
    const std::string a = p + ".self_attn";
    return std::make_unique<AttentionLayer>(
        ac, linear(a + ".q_proj", qw, H), linear(a + ".k_proj", kw, H), linear(a + ".v_proj", kw, H),
        linear(a + ".out_proj", H, qw),
        RmsNorm(weight(files, a + ".q_layernorm.weight", {D}), eps, false, a + ".q_layernorm"),
        RmsNorm(weight(files, a + ".k_layernorm.weight", {D}), eps, false, a + ".k_layernorm"), rope, a);
  };
  parts.ffn = [&](HybridFfn kind, int64_t, const std::string& p) -> std::unique_ptr<FeedForward> {
    const std::string f = p + ".feed_forward";
    if (kind == HybridFfn::dense)
      return std::make_unique<GatedMlp>(load_gated_mlp(files, f, kLfm2MlpNames, dense_width(files, f), H,
                                                       Activation::silu, store, &owned));
    const int64_t E = moe.shape.num_experts;
    std::vector<GatedMlp> experts;
    for (int64_t e = 0; e < E; ++e)
      experts.push_back(load_gated_mlp(files, f + ".experts." + std::to_string(e), kLfm2MlpNames, moe.expert_inter, H,
                                       Activation::silu, store, &owned));
    // The router in f32 whatever the weight precision, as for DeepSeek's: a rounded router picks other experts.
    return std::make_unique<DeepseekMoe>(moe.shape.config, load_linear(files, f + ".gate", E, H, DType::f32, &owned),
                                         optional_weight(files, f + ".expert_bias", {E}), std::move(experts),
                                         std::nullopt, f);
  };
  return assemble_hybrid_stack(std::move(files), std::move(info), layers, parts, store, owned);
}

ModelDescription describe_lfm2(const Config& root, const LoadOptions& options) {
  const Config c = root.text_config();
  ModelDescription d;
  d.info = read_info(root, c, options);
  const Lfm2Moe moe(c);
  // LFM2-MoE's dense layers are intermediate_size wide as written; LFM2's width is adjusted (the weights tell).
  if (moe.first_sparse >= 0) d.info.intermediate_size = c.get_int("intermediate_size");
  d.attention = model_attention_config(d.info, 0, options);
  // The conv length, which the builder reads off the conv weights, is conv_L_cache in the config.
  const int64_t L = c.get_int_or("conv_L_cache", 3);
  if (L < 1) throw LoadError(c.source() + ": key 'conv_L_cache': must be positive");
  for (const HybridLayer& l : lfm2_layers(c, d.info.num_layers, moe.first_sparse)) {
    if (l.mixer == HybridMixer::short_conv)
      d.info.layers.push_back({ShortConvMixer::kKind, 0, ShortConvMixer::spec(d.info.hidden_size, L)});
    else
      d.info.layers.push_back({AttentionLayer::kind_of(*d.attention), 0, AttentionLayer::spec(*d.attention)});
  }
  d.info.tied_embeddings = config_ties_embeddings(root, c, c.get_bool_or("tie_embedding", true));
  return d;
}

}  // namespace attnzoo
