// DeepseekV3ForCausalLM and DeepseekV2ForCausalLM: multi-head latent attention (q LoRA or plain q_proj, latent KV cache, RoPE on the
// qk_rope_head_dim part only, interleaved channel pairs when rope_interleave) in every layer; a dense gated MLP
// in the first first_k_dense_replace layers and DeepSeek's MoE with shared experts after: V3's sigmoid router with
// grouped top-k and e_score_correction_bias, V2's softmax router with topk_method greedy or group_limited_greedy
// (groups scored by their best expert). V2 honours norm_topk_prob as DeepSeek's own code and llama.cpp do
// (transformers' DeepseekV2 ignores it; every V2 release sets it false). V2 always rotates interleaved pairs.
// With YaRN, transformers multiplies the softmax scale by mscale(factor, mscale_all_dim)^2 on top of the rope's
// own attention factor on cos/sin; both are reproduced (read_mla_rope). The multi-token-prediction layers some
// checkpoints carry past num_hidden_layers are not read.
#include "layers/activations.h"
#include "loader/load_error.h"
#include "models/decoder.h"
#include "models/deepseek_moe_from_checkpoint.h"
#include "models/describe.h"
#include "models/llama_layout.h"
#include "models/mla_from_checkpoint.h"
#include "models/registry.h"

namespace attnzoo {
namespace {

// Everything the builder reads from config.json, shared with describe_deepseek_v3.
struct DeepseekShape {
  ModelInfo info;
  float eps = 1e-6f;
  Activation act = Activation::silu;
  MlaConfig mc;
  RopeConfig rope;
  int64_t first_dense = 0;
  DeepseekMoeShape moe;
};

DeepseekShape read_shape(const Config& c, const LoadOptions& options) {
  DeepseekShape s;
  ModelInfo& info = s.info = read_mla_model_info(c, options, 0);
  s.eps = float(c.get_float_or("rms_norm_eps", 1e-6));
  s.act = parse_activation(c.get_string_or("hidden_act", "silu"));
  const MlaConfig& mc = s.mc = read_mla_config(c, info, options);
  if (info.hidden_size <= 0 || info.num_layers <= 0 || info.num_heads <= 0 || info.vocab_size <= 0 ||
      mc.kv_lora_rank <= 0 || mc.qk_nope_head_dim <= 0 || mc.qk_rope_head_dim <= 0 || mc.v_head_dim <= 0 ||
      mc.q_lora_rank < 0)
    throw LoadError(c.source() + ": sizes (hidden_size, num_*, kv_lora_rank, q_lora_rank, qk_*_head_dim, "
                    "v_head_dim, vocab_size) must be positive");
  s.rope = read_mla_rope(c, s.mc);

  s.moe.num_experts = c.get_int_or("n_routed_experts", 0);
  s.first_dense = c.get_int_or("first_k_dense_replace", 0);
  DeepseekMoeConfig& moe = s.moe.config;
  moe.top_k = c.get_int_or("num_experts_per_tok", 1);
  if (info.architecture == "DeepseekV2ForCausalLM") {
    moe.scoring = DeepseekScoring::softmax;
    moe.group_score = DeepseekGroupScore::max;
    const std::string method = c.get_string_or("topk_method", "greedy");
    if (method != "greedy" && method != "group_limited_greedy")
      throw LoadError(c.source() + ": key 'topk_method': '" + method + "' is not greedy or group_limited_greedy");
    const bool grouped = method == "group_limited_greedy";
    moe.n_group = grouped ? c.get_int("n_group") : 1;
    moe.topk_group = grouped ? c.get_int("topk_group") : 1;
    moe.norm_topk_prob = c.get_bool_or("norm_topk_prob", false);
  } else {
    moe.n_group = c.get_int_or("n_group", 1);
    moe.topk_group = c.get_int_or("topk_group", 1);
    moe.norm_topk_prob = c.get_bool_or("norm_topk_prob", true);
  }
  moe.routed_scaling_factor = float(c.get_float_or("routed_scaling_factor", 1.0));
  s.moe.n_shared = c.get_int_or("n_shared_experts", 0);

  return s;
}

}  // namespace

std::unique_ptr<Model> build_deepseek_v3(ModelFiles files, const LoadOptions& options) {
  const Config& c = files.config();
  const DeepseekShape shape = read_shape(c, options);
  ModelInfo info = shape.info;
  const int64_t H = info.hidden_size;
  const Rope rope(shape.rope);

  count_checkpoint(files, info);

  WeightBytes owned;
  LlamaLayoutParts parts;
  parts.norm_eps = shape.eps;
  parts.mixer = [&](int64_t, const std::string& p) -> std::unique_ptr<SequenceMixer> {
    return load_mla_mixer(files, shape.mc, rope, p + ".self_attn", options.weights, &owned);
  };
  parts.ffn = [&](int64_t i, const std::string& p) -> std::unique_ptr<FeedForward> {
    const std::string m = p + ".mlp";
    if (shape.moe.num_experts <= 0 || i < shape.first_dense)
      return std::make_unique<GatedMlp>(load_gated_mlp(files, m, kGatedMlpProjNames, c.get_int("intermediate_size"),
                                                       H, shape.act, options.weights, &owned));
    return load_deepseek_moe(files, shape.moe, m, kGatedMlpProjNames, c.get_int("moe_intermediate_size"), H,
                             shape.act, options.weights, &owned);
  };
  return assemble_llama_layout(std::move(files), c, std::move(info), parts, options.weights, owned);
}

ModelDescription describe_deepseek_v3(const Config& root, const LoadOptions& options) {
  const DeepseekShape s = read_shape(root, options);
  ModelDescription d;
  d.info = s.info;
  d.mla = s.mc;
  const int64_t H = s.info.hidden_size, V = s.info.vocab_size;
  d.info.tied_embeddings = root.get_bool_or("tie_word_embeddings", false);
  const int64_t mla = mla_parameter_count(s.mc, root.get_bool_or("attention_bias", false));
  Checked params = Checked(V) * H * (d.info.tied_embeddings ? 1 : 2) + H;
  for (int64_t i = 0; i < d.info.num_layers; ++i) {
    d.info.layers.push_back({MlaMixer::kKind, 0, MlaMixer::spec(s.mc)});
    params += Checked(2) * H + mla;
    params += deepseek_ffn_parameter_count(root, s.moe, s.moe.num_experts > 0 && i >= s.first_dense, H);
  }
  d.info.parameter_count = params.value();
  d.parameters_estimated = true;
  return d;
}

}  // namespace attnzoo
