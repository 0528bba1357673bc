// MiniMaxForCausalLM (MiniMax-Text-01 / MiniMax-M1) on the pattern-driven hybrid stack (hybrid_stack.h): lightning
// attention (layers/lightning_attention_mixer.h) in most layers, softmax attention with RoPE in the others
// (layer_types "linear_attention" / "full_attention", or the original attn_type_list of 0 / 1: a softmax layer
// every 8th in the releases), a Mixtral-style sparse MoE in every block (block_sparse_moe: softmax router, top k
// renormalized, experts w1 / w3 / w2 of intermediate_size). The blocks are "postnorm": each sublayer adds to its
// own normed input, scaled,
//   h = input_layernorm(x);          x = attn_alpha * h + attn_beta * attn(h)
//   h = post_attention_layernorm(x); x = mlp_alpha * h + mlp_beta * moe(h)
// with alpha / beta per kind of attention (full_attn_* / linear_attn_* / mlp_*_factor, or the original
// layernorm_{full_attention,linear_attention,mlp}_{alpha,beta}). The checkpoint's decay buffers (slope_rate,
// query_decay, key_decay, diagonal_decay) are derived from the layer index: slope_rate is read when present, the
// others are not needed (the simple GLA kernels apply the decay themselves).
#include "layers/lightning_attention_mixer.h"
#include "layers/moe.h"
#include "layers/sequence_schedule.h"
#include "loader/load_error.h"
#include "models/decoder.h"
#include "models/describe.h"
#include "models/hf_config.h"
#include "models/hybrid_stack.h"
#include "models/registry.h"

namespace attnzoo {
namespace {

// The decay buffers transformers saves with each lightning layer: not parameters.
constexpr const char* kDecayBuffers[] = {"slope_rate", "query_decay", "key_decay", "diagonal_decay"};

struct MiniMaxShape {
  ModelInfo info;
  std::vector<HybridLayer> layers;  // minimax_layers
  AttentionConfig ac;
  int64_t experts = 8, top_k = 2;
  float eps = 1e-5f;
  ResidualScales full, linear, mlp;  // the postnorm residuals' alpha / beta
};

MiniMaxShape read_shape(const Config& root, const Config& c, const LoadOptions& options) {
  MiniMaxShape s;
  s.info = read_dense_model_info(root, c, options, "minimax");
  s.layers = minimax_layers(c, s.info.num_layers);
  if (c.find("sliding_window"))
    throw LoadError(c.source() + ": key 'sliding_window': windowed softmax layers are not supported for MiniMax");
  s.experts = c.get_int_or("num_local_experts", c.get_int_or("num_experts", 8));
  s.top_k = c.get_int_or("num_experts_per_tok", 2);
  if (s.experts <= 0) throw LoadError(c.source() + ": key 'num_local_experts': must be positive");
  s.eps = float(c.get_float_or("rms_norm_eps", 1e-5));
  auto factor = [&](const char* hf, const char* original) {
    return float(c.get_float_or(hf, c.get_float_or(original, 1.0)));
  };
  s.full = {factor("full_attn_alpha_factor", "layernorm_full_attention_alpha"),
            factor("full_attn_beta_factor", "layernorm_full_attention_beta")};
  s.linear = {factor("linear_attn_alpha_factor", "layernorm_linear_attention_alpha"),
              factor("linear_attn_beta_factor", "layernorm_linear_attention_beta")};
  s.mlp = {factor("mlp_alpha_factor", "layernorm_mlp_alpha"), factor("mlp_beta_factor", "layernorm_mlp_beta")};
  if (c.get_string_or("hidden_act", "silu") != "silu")
    throw LoadError(c.source() + ": hidden_act '" + c.get_string_or("hidden_act", "") +
                    "' is not supported (MiniMax's lightning attention and experts use silu)");
  s.ac = model_attention_config(s.info, 0, options);
  return s;
}

LightningAttentionConfig lightning_config(const ModelInfo& info, int64_t layer) {
  LightningAttentionConfig lc;
  lc.hidden = info.hidden_size;
  lc.heads = info.num_heads;
  lc.head_dim = info.head_dim;
  lc.slopes = minimax_slopes(info.num_heads, layer, info.num_layers);
  return lc;
}

}  // namespace

std::unique_ptr<Model> build_minimax(ModelFiles files, const LoadOptions& options) {
  const Config c = files.config().text_config();
  const MiniMaxShape s = read_shape(files.config(), c, options);
  ModelInfo info = s.info;
  const int64_t H = info.hidden_size, I = info.intermediate_size, qw = info.num_heads * info.head_dim;
  const Rope rope(read_rope(c, info.head_dim, kWholeHead));

  count_checkpoint(files, info);
  for (int64_t i = 0; i < info.num_layers; ++i)
    for (const char* b : kDecayBuffers) {
      const std::string name = "model.layers." + std::to_string(i) + ".self_attn." + b;
      if (files.has(name)) info.parameter_count -= files.numel(name);
    }
  WeightBytes owned;
  const DType store = options.weights;
  auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    return load_linear(files, name, out, in, store, &owned);
  };

  HybridStackParts parts;
  parts.norm_eps = s.eps;
  parts.residual_is_normed = true;
  parts.mixer_residual = {{HybridMixer::lightning, s.linear}, {HybridMixer::attention, s.full}};
  parts.ffn_residual = s.mlp;
  parts.mixer = [&](HybridMixer kind, int64_t i, const std::string& p) -> std::unique_ptr<SequenceMixer> {
    const std::string a = p + ".self_attn";
    if (kind == HybridMixer::attention) return load_hybrid_attention(files, s.ac, a, rope, store, &owned);
    LightningAttentionConfig lc = lightning_config(s.info, i);
    if (files.has(a + ".slope_rate")) {  // the checkpoint's own rates win, as in transformers
      const int64_t heads = s.info.num_heads;
      const TensorView rate = weight(files, a + ".slope_rate", {heads, 1, 1});
      lc.slopes = widen_vector(TensorView::contiguous(rate.data, rate.dtype, {heads}), heads, a + ".slope_rate");
    }
    LightningAttentionWeights w;
    w.qkv_proj = linear(a + ".qkv_proj", 3 * qw, H);
    w.output_gate = linear(a + ".output_gate", qw, H);
    w.out_proj = linear(a + ".out_proj", H, qw);
    w.norm = weight(files, a + ".norm.weight", {qw});
    return std::make_unique<LightningAttentionMixer>(lc, std::move(w), a);
  };
  parts.ffn = [&](HybridFfn, int64_t, const std::string& p) -> std::unique_ptr<FeedForward> {
    const std::string m = p + ".block_sparse_moe";
    MoeConfig mc;
    mc.top_k = s.top_k;
    mc.normalize_top_k = true;
    std::vector<GatedMlp> experts;
    for (int64_t e = 0; e < s.experts; ++e) {
      const std::string x = m + ".experts." + std::to_string(e);
      experts.emplace_back(linear(x + ".w1", I, H), linear(x + ".w3", I, H), linear(x + ".w2", H, I),
                           Activation::silu, x);
    }
    return std::make_unique<SparseMoe>(mc, linear(m + ".gate", s.experts, H), std::move(experts), std::nullopt,
                                       std::nullopt, m);
  };
  return assemble_hybrid_stack(std::move(files), std::move(info), s.layers, parts, store, owned);
}

ModelDescription describe_minimax(const Config& root, const LoadOptions& options) {
  const Config c = root.text_config();
  const MiniMaxShape s = read_shape(root, c, options);
  ModelDescription d;
  d.info = s.info;
  (void)read_rope(c, d.info.head_dim, kWholeHead);  // unsupported rope types fail here as in the builder
  d.attention = s.ac;
  d.info.tied_embeddings = config_ties_embeddings(root, c, false);
  const int64_t H = d.info.hidden_size, I = d.info.intermediate_size, V = d.info.vocab_size;
  const int64_t qw = d.info.num_heads * d.info.head_dim;
  Checked params = Checked(V) * H * (d.info.tied_embeddings ? 1 : 2) + H;
  for (size_t i = 0; i < s.layers.size(); ++i) {
    if (s.layers[i].mixer == HybridMixer::lightning) {
      d.info.layers.push_back({LightningAttentionMixer::kKind, 0,
                               LightningAttentionMixer::spec(lightning_config(d.info, int64_t(i)))});
      params += linear_params(3 * qw, H) + linear_params(qw, H) + linear_params(H, qw) + qw;
    } else {
      d.info.layers.push_back({AttentionLayer::kind_of(s.ac), 0, AttentionLayer::spec(s.ac)});
      params += attention_parameter_count(s.ac, false);
    }
    // two block norms, the router and the experts
    params += Checked(2) * H + Checked(s.experts) * (Checked(H) + Checked(3) * I * H);
  }
  d.info.parameter_count = params.value();
  d.parameters_estimated = true;
  return d;
}

}  // namespace attnzoo
