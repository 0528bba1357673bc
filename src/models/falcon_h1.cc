// FalconH1ForCausalLM: every layer runs softmax attention and a Mamba-2 mixer side by side on the same normed
// input and adds their outputs, then a SwiGLU feed-forward. muP multipliers are applied where transformers applies
// them: embeddings (embedding_multiplier), logits (lm_head_multiplier), the attention input / output
// (attention_in/out_multiplier), keys (key_multiplier, folded into the attention scale: keys only meet queries in
// the dot product), the SSM input / output (ssm_in/out_multiplier), the Mamba in_proj outputs per section
// (ssm_multipliers over z, x, B, C, dt) and the MLP gate / down projections (mlp_multipliers: ScaledGatedMlp).
#include <cmath>

#include "layers/activations.h"
#include "layers/mamba2_mixer.h"
#include "layers/scaled_gated_mlp.h"
#include "layers/parallel_mixer.h"
#include "loader/json.h"
#include "loader/load_error.h"
#include "models/decoder.h"
#include "models/describe.h"
#include "models/hf_config.h"
#include "models/mamba2_config.h"
#include "models/mamba2_from_checkpoint.h"
#include "models/output_head.h"
#include "models/registry.h"

namespace attnzoo {
namespace {

std::vector<double> float_list_or(const Config& c, const char* key, std::vector<double> fallback, size_t n) {
  std::vector<double> v = c.has(key) ? c.get_float_list(key) : fallback;
  if (v.size() != n)
    throw LoadError(c.source() + ": key '" + key + "': expected " + std::to_string(n) + " values, got " +
                    std::to_string(v.size()));
  return v;
}

// The config.json reading shared by the builder and describe_falcon_h1 (`c`: the text config); the Mamba-2
// config is complete except for the muP proj_multipliers, which the builder adds.
struct FalconH1Shape {
  ModelInfo info;
  float eps = 1e-5f;
  Activation act = Activation::silu;
  Mamba2MixerConfig mc;
};

FalconH1Shape read_shape(const Config& root, const Config& c, const LoadOptions& options) {
  FalconH1Shape s;
  ModelInfo& info = s.info;
  info = read_model_info(root, c, options, "falcon_h1", /*with_intermediate=*/true);
  const float eps = s.eps = float(c.get_float_or("rms_norm_eps", 1e-5));
  const int64_t H = info.hidden_size, I = info.intermediate_size, D = info.head_dim;
  if (H <= 0 || I <= 0 || info.num_layers <= 0 || info.num_heads <= 0 || info.num_kv_heads <= 0 || D <= 0 ||
      info.vocab_size <= 0)
    throw LoadError(c.source() + ": sizes (hidden_size, intermediate_size, num_*, head_dim, vocab_size) must be positive");
  const std::string act_name = c.get_string_or("hidden_act", "silu");
  const Activation act = s.act = parse_activation(act_name);
  if (act != Activation::silu)
    throw LoadError(c.source() + ": hidden_act '" + act_name + "' is not supported by the Mamba-2 conv (only silu)");

  Mamba2MixerConfig& mc = s.mc;
  mc.hidden = H;
  const int64_t inner = c.has("mamba_d_ssm") ? c.get_int("mamba_d_ssm") : c.get_int_or("mamba_expand", 2) * H;
  mc.num_heads = c.get_int("mamba_n_heads");
  const json::Value* d_head = c.find("mamba_d_head");
  mc.head_dim = d_head && d_head->is_number() ? c.get_int("mamba_d_head") : inner / std::max<int64_t>(1, mc.num_heads);
  mc.n_groups = c.get_int_or("mamba_n_groups", 1);
  mc.state_size = c.get_int("mamba_d_state");
  mc.conv_kernel = c.get_int_or("mamba_d_conv", 4);
  mc.gated_norm = c.get_bool_or("mamba_rms_norm", false);
  mc.norm_before_gate = c.get_bool_or("mamba_norm_before_gate", true);
  mc.norm_groups = mc.n_groups;
  mc.norm_eps = eps;
  std::tie(mc.dt_min, mc.dt_max) = read_time_step_limit(c);
  if (mc.num_heads <= 0 || mc.head_dim <= 0 || mc.state_size <= 0 || mc.n_groups <= 0 || mc.conv_kernel <= 0 ||
      mc.num_heads * mc.head_dim != inner)
    throw LoadError(c.source() + ": mamba sizes must be positive and mamba_n_heads * mamba_d_head must equal the "
                                 "SSM width (" + std::to_string(inner) + ")");
  if (mc.num_heads % mc.n_groups != 0)
    throw LoadError(c.source() + ": mamba_n_groups (" + std::to_string(mc.n_groups) + ") must divide mamba_n_heads (" +
                    std::to_string(mc.num_heads) + ")");
  (void)I;
  return s;
}

AttentionConfig attention_config(const ModelInfo& info, const Config& c, const LoadOptions& options) {
  AttentionConfig ac = model_attention_config(info, 0, options);
  ac.scale = float(c.get_float_or("key_multiplier", 1.0)) / std::sqrt(float(info.head_dim));
  return ac;
}

}  // namespace

std::unique_ptr<Model> build_falcon_h1(ModelFiles files, const LoadOptions& options) {
  const Config c = files.config().text_config();
  const FalconH1Shape shape = read_shape(files.config(), c, options);
  ModelInfo info = shape.info;
  const float eps = shape.eps;
  const Activation act = shape.act;
  const int64_t H = info.hidden_size, I = info.intermediate_size, D = info.head_dim;
  Mamba2MixerConfig mc = shape.mc;
  const int64_t inner = mc.inner();
  const std::vector<double> ssm_m = float_list_or(c, "ssm_multipliers", {1, 1, 1, 1, 1}, 5);
  const std::vector<double> mlp_m = float_list_or(c, "mlp_multipliers", {1, 1}, 2);
  {
    // The muP vector over in_proj's outputs [z | x | B | C | dt].
    const int64_t GN = mc.n_groups * mc.state_size;
    const int64_t bounds[6] = {0, inner, 2 * inner, 2 * inner + GN, 2 * inner + 2 * GN, mc.proj_dim()};
    bool any = false;
    for (double m : ssm_m) any = any || m != 1.0;
    if (any) {
      mc.proj_multipliers.resize(size_t(mc.proj_dim()));
      for (int k = 0; k < 5; ++k)
        for (int64_t i = bounds[k]; i < bounds[k + 1]; ++i) mc.proj_multipliers[size_t(i)] = float(ssm_m[size_t(k)]);
    }
  }
  const float attn_in = float(c.get_float_or("attention_in_multiplier", 1.0));
  const float attn_out = float(c.get_float_or("attention_out_multiplier", 1.0));
  const float ssm_in = float(c.get_float_or("ssm_in_multiplier", 1.0));
  const float ssm_out = float(c.get_float_or("ssm_out_multiplier", 1.0));
  DecoderOptions dopts;
  dopts.embedding_scale = float(c.get_float_or("embedding_multiplier", 1.0));
  dopts.logits_scale = float(c.get_float_or("lm_head_multiplier", 1.0));
  const Rope rope(read_rope(c, D, kWholeHead));

  count_checkpoint(files, info);
  WeightBytes owned;
  auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    return load_linear(files, name, out, in, options.weights, &owned);
  };

  Embedding embed = load_embedding(files, "model.embed_tokens.weight", info.vocab_size, H);
  std::vector<DecoderBlock> blocks;
  const int64_t qw = info.num_heads * D, kw = info.num_kv_heads * D;
  for (int64_t i = 0; i < info.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i);
    const std::string a = p + ".self_attn";
    const AttentionConfig ac = attention_config(info, c, options);
    auto attn = std::make_unique<AttentionLayer>(ac, linear(a + ".q_proj", qw, H), linear(a + ".k_proj", kw, H),
                                                 linear(a + ".v_proj", kw, H), linear(a + ".o_proj", H, qw),
                                                 std::nullopt, std::nullopt, rope, a);
    const std::string m = p + ".mamba";
    std::vector<ParallelBranch> branches;
    branches.push_back({std::move(attn), attn_in, attn_out});
    branches.push_back({load_mamba2_mixer(files, mc, m, options.weights, &owned), ssm_in, ssm_out});
    auto mixer = std::make_unique<ParallelMixer>(H, std::move(branches));
    info.layers.push_back({mixer->kind(), mixer->window(), mixer->cache_spec()});
    const std::string f = p + ".feed_forward";
    DecoderBlock block;
    block.input_norm = RmsNorm(weight(files, p + ".input_layernorm.weight", {H}), eps, false, p + ".input_layernorm");
    block.mixer = std::move(mixer);
    block.pre_ffn_norm.emplace(weight(files, p + ".pre_ff_layernorm.weight", {H}), eps, false, p + ".pre_ff_layernorm");
    block.ffn = std::make_unique<ScaledGatedMlp>(
        GatedMlp(linear(f + ".gate_proj", I, H), linear(f + ".up_proj", I, H), linear(f + ".down_proj", H, I), act, f),
        float(mlp_m[0]), float(mlp_m[1]));
    blocks.push_back(std::move(block));
  }
  RmsNorm norm(weight(files, "model.final_layernorm.weight", {H}), eps, false, "model.final_layernorm");
  info.tied_embeddings = ties_embeddings(files, c, false);
  Linear lm_head =
      load_output_head(files, embed, "model.embed_tokens.weight", info.tied_embeddings, options.weights, &owned);
  owned.record(info);
  return std::make_unique<DecoderModel>(std::move(files), std::move(info), std::move(embed), std::move(blocks),
                                        std::move(norm), std::move(lm_head), dopts);
}

ModelDescription describe_falcon_h1(const Config& root, const LoadOptions& options) {
  const Config c = root.text_config();
  const FalconH1Shape s = read_shape(root, c, options);
  ModelDescription d;
  d.info = s.info;
  d.attention = attention_config(s.info, c, options);
  const LayerInfo layer{ParallelMixer::join_kinds({AttentionLayer::kind_of(*d.attention), Mamba2Mixer::kKind}), 0,
                        ParallelMixer::combine({AttentionLayer::spec(*d.attention), Mamba2Mixer::spec(s.mc)})};
  d.info.layers.assign(size_t(d.info.num_layers), layer);
  d.info.tied_embeddings = config_ties_embeddings(root, c, false);
  return d;
}

}  // namespace attnzoo
