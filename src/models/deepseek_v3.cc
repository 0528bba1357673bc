// DeepseekV3ForCausalLM: multi-head latent attention (q LoRA or plain q_proj, latent KV cache, RoPE on the
// qk_rope_head_dim part only, interleaved channel pairs when rope_interleave) in every layer; a dense gated MLP
// in the first first_k_dense_replace layers and DeepSeek's sigmoid grouped-top-k MoE with shared experts after.
// With YaRN, transformers multiplies the softmax scale by mscale(factor, mscale_all_dim)^2 on top of the rope's
// own attention factor on cos/sin; both are reproduced here. The multi-token-prediction layers some checkpoints
// carry past num_hidden_layers are not read.
#include <cmath>

#include "layers/activations.h"
#include "layers/deepseek_moe.h"
#include "layers/mla_mixer.h"
#include "loader/load_error.h"
#include "models/decoder.h"
#include "models/describe.h"
#include "models/hf_config.h"
#include "models/registry.h"

namespace attnzoo {
namespace {

double yarn_mscale(double scale, double mscale) { return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

// Everything the builder reads from config.json, shared with describe_deepseek_v3.
struct DeepseekShape {
  ModelInfo info;
  float eps = 1e-6f;
  Activation act = Activation::silu;
  MlaConfig mc;
  RopeConfig rope;
  int64_t num_experts = 0, first_dense = 0, n_shared = 0;
  DeepseekMoeConfig moe;
};

DeepseekShape read_shape(const Config& c, const LoadOptions& options) {
  DeepseekShape s;
  ModelInfo& info = s.info;
  info.architecture = c.get_string_list("architectures")[0];
  info.model_type = c.get_string_or("model_type", "");
  info.hidden_size = c.get_int("hidden_size");
  info.intermediate_size = c.get_int_or("intermediate_size", 0);
  info.num_layers = c.get_int("num_hidden_layers");
  info.num_heads = c.get_int("num_attention_heads");
  info.num_kv_heads = info.num_heads;  // MLA: every head reads the one shared latent
  info.vocab_size = c.get_int("vocab_size");
  info.max_position_embeddings = c.get_int_or("max_position_embeddings", 0);
  info.checkpoint_dtype = c.dtype();
  info.weights = options.weights;
  const float eps = s.eps = float(c.get_float_or("rms_norm_eps", 1e-6));
  s.act = parse_activation(c.get_string_or("hidden_act", "silu"));
  const int64_t H = info.hidden_size;

  MlaConfig& mc = s.mc;
  mc.hidden = H;
  mc.num_heads = info.num_heads;
  mc.q_lora_rank = c.has("q_lora_rank") ? c.get_int("q_lora_rank") : 0;
  mc.kv_lora_rank = c.get_int("kv_lora_rank");
  mc.qk_nope_head_dim = c.get_int("qk_nope_head_dim");
  mc.qk_rope_head_dim = c.get_int("qk_rope_head_dim");
  mc.v_head_dim = c.get_int("v_head_dim");
  mc.norm_eps = eps;
  mc.cache_block_tokens = options.kv_block_tokens;
  info.head_dim = mc.qk_head_dim();
  if (H <= 0 || info.num_layers <= 0 || info.num_heads <= 0 || info.vocab_size <= 0 || mc.kv_lora_rank <= 0 ||
      mc.qk_nope_head_dim <= 0 || mc.qk_rope_head_dim <= 0 || mc.v_head_dim <= 0 || mc.q_lora_rank < 0)
    throw LoadError(c.source() + ": sizes (hidden_size, num_*, kv_lora_rank, q_lora_rank, qk_*_head_dim, "
                    "v_head_dim, vocab_size) must be positive");

  RopeConfig& rc = s.rope;
  rc = read_rope(c, mc.qk_rope_head_dim);
  rc.layout = c.get_bool_or("rope_interleave", true) ? RopeLayout::interleaved : RopeLayout::half;
  mc.scale = float(1.0 / std::sqrt(double(mc.qk_head_dim())));
  if (rc.type != "default" && rc.mscale_all_dim != 0.0) {
    const double m = yarn_mscale(rc.factor, rc.mscale_all_dim);
    mc.scale = float(double(mc.scale) * m * m);
  }

  s.num_experts = c.get_int_or("n_routed_experts", 0);
  s.first_dense = c.get_int_or("first_k_dense_replace", 0);
  DeepseekMoeConfig& moe = s.moe;
  moe.top_k = c.get_int_or("num_experts_per_tok", 1);
  moe.n_group = c.get_int_or("n_group", 1);
  moe.topk_group = c.get_int_or("topk_group", 1);
  moe.norm_topk_prob = c.get_bool_or("norm_topk_prob", true);
  moe.routed_scaling_factor = float(c.get_float_or("routed_scaling_factor", 1.0));
  s.n_shared = c.get_int_or("n_shared_experts", 0);

  return s;
}

}  // namespace

std::unique_ptr<Model> build_deepseek_v3(ModelFiles files, const LoadOptions& options) {
  const Config& c = files.config();
  const DeepseekShape shape = read_shape(c, options);
  ModelInfo info = shape.info;
  const float eps = shape.eps;
  const Activation act = shape.act;
  const int64_t H = info.hidden_size;
  const MlaConfig& mc = shape.mc;
  const Rope rope(shape.rope);
  const int64_t num_experts = shape.num_experts, first_dense = shape.first_dense, n_shared = shape.n_shared;
  const DeepseekMoeConfig& moe = shape.moe;

  count_checkpoint(files, info);

  uint64_t owned = 0;
  auto linear = [&](const std::string& name, int64_t out, int64_t in, DType store) {
    return load_linear(files, name, out, in, store, &owned);
  };
  auto proj = [&](const std::string& name, int64_t out, int64_t in) { return linear(name, out, in, options.weights); };
  auto norm = [&](const std::string& name, int64_t dim) {
    return RmsNorm(weight(files, name + ".weight", {dim}), eps, /*add_one=*/false, name);
  };
  auto gated_mlp = [&](const std::string& m, int64_t inter) {
    return GatedMlp(proj(m + ".gate_proj", inter, H), proj(m + ".up_proj", inter, H), proj(m + ".down_proj", H, inter),
                    act, m);
  };

  auto attention = [&](const std::string& a) {
    const int64_t qw = mc.num_heads * mc.qk_head_dim();
    MlaLayerWeights w;
    if (mc.q_lora_rank > 0) {
      w.q_a_proj.emplace(proj(a + ".q_a_proj", mc.q_lora_rank, H));
      w.q_a_norm.emplace(norm(a + ".q_a_layernorm", mc.q_lora_rank));
      w.q_b_proj.emplace(proj(a + ".q_b_proj", qw, mc.q_lora_rank));
    } else {
      w.q_proj.emplace(proj(a + ".q_proj", qw, H));
    }
    w.kv_a_proj = proj(a + ".kv_a_proj_with_mqa", mc.latent_dim(), H);
    w.kv_a_norm = norm(a + ".kv_a_layernorm", mc.kv_lora_rank);
    w.kv_b_proj = proj(a + ".kv_b_proj", mc.num_heads * (mc.qk_nope_head_dim + mc.v_head_dim), mc.kv_lora_rank);
    w.o_proj = proj(a + ".o_proj", H, mc.num_heads * mc.v_head_dim);
    return std::make_unique<MlaMixer>(mc, std::move(w), rope, a);
  };

  auto feed_forward = [&](const std::string& m, int64_t i) -> std::unique_ptr<FeedForward> {
    if (num_experts <= 0 || i < first_dense) return std::make_unique<GatedMlp>(gated_mlp(m, c.get_int("intermediate_size")));
    const int64_t I = c.get_int("moe_intermediate_size");
    std::vector<GatedMlp> experts;
    for (int64_t e = 0; e < num_experts; ++e) experts.push_back(gated_mlp(m + ".experts." + std::to_string(e), I));
    std::optional<GatedMlp> shared;
    if (n_shared > 0) shared.emplace(gated_mlp(m + ".shared_experts", I * n_shared));
    // The router stays f32 whatever the weight precision: transformers keeps gate.weight in f32 too, and a
    // rounded router can pick other experts.
    return std::make_unique<DeepseekMoe>(moe, linear(m + ".gate", num_experts, H, DType::f32),
                                         optional_weight(files, m + ".gate.e_score_correction_bias", {num_experts}),
                                         std::move(experts), std::move(shared), m);
  };

  Embedding embed(weight(files, "model.embed_tokens.weight", {info.vocab_size, H}), "model.embed_tokens.weight");
  std::vector<DecoderBlock> blocks;
  for (int64_t i = 0; i < info.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i);
    DecoderBlock block;
    block.mixer = attention(p + ".self_attn");
    info.layers.push_back({block.mixer->kind(), block.mixer->window(), block.mixer->cache_spec()});
    block.input_norm = norm(p + ".input_layernorm", H);
    block.pre_ffn_norm.emplace(norm(p + ".post_attention_layernorm", H));
    block.ffn = feed_forward(p + ".mlp", i);
    blocks.push_back(std::move(block));
  }
  RmsNorm final_norm = norm("model.norm", H);
  info.tied_embeddings = ties_embeddings(files, c, false);
  Linear lm_head = info.tied_embeddings
                       ? Linear::from_weights(embed.table(), {}, "model.embed_tokens.weight", options.weights)
                       : proj("lm_head", info.vocab_size, H);
  if (info.tied_embeddings && lm_head.owns_weight()) owned += lm_head.weight_bytes();
  info.owned_weight_bytes = owned;
  return std::make_unique<DecoderModel>(std::move(files), std::move(info), std::move(embed), std::move(blocks),
                                        std::move(final_norm), std::move(lm_head));
}

ModelDescription describe_deepseek_v3(const Config& root, const LoadOptions& options) {
  const DeepseekShape s = read_shape(root, options);
  ModelDescription d;
  d.info = s.info;
  d.mla = s.mc;
  const MlaConfig& mc = s.mc;
  const int64_t H = s.info.hidden_size, V = s.info.vocab_size;
  d.info.tied_embeddings = root.get_bool_or("tie_word_embeddings", false);
  const int64_t qw = mc.num_heads * mc.qk_head_dim();
  // attention_bias: transformers gives q_a_proj, kv_a_proj_with_mqa and o_proj a bias (never q_proj / q_b_proj).
  const bool bias = root.get_bool_or("attention_bias", false);
  const int64_t mla = (mc.q_lora_rank > 0 ? linear_params(mc.q_lora_rank, H, bias) + mc.q_lora_rank +
                                                linear_params(qw, mc.q_lora_rank)
                                          : linear_params(qw, H)) +
                      linear_params(mc.latent_dim(), H, bias) + mc.kv_lora_rank +
                      linear_params(mc.num_heads * (mc.qk_nope_head_dim + mc.v_head_dim), mc.kv_lora_rank) +
                      linear_params(H, mc.num_heads * mc.v_head_dim, bias);
  int64_t params = V * H * (d.info.tied_embeddings ? 1 : 2) + H;
  for (int64_t i = 0; i < d.info.num_layers; ++i) {
    d.info.layers.push_back({MlaMixer::kKind, 0, MlaMixer::spec(mc)});
    params += 2 * H + mla;
    if (s.num_experts <= 0 || i < s.first_dense) {
      params += 3 * linear_params(root.get_int("intermediate_size"), H);
    } else {
      const int64_t I = root.get_int("moe_intermediate_size");
      params += s.num_experts * 3 * linear_params(I, H) + (s.n_shared > 0 ? 3 * linear_params(I * s.n_shared, H) : 0) +
                linear_params(s.num_experts, H) + s.num_experts;  // router + e_score_correction_bias
    }
  }
  d.info.parameter_count = params;
  d.parameters_estimated = true;
  return d;
}

}  // namespace attnzoo
