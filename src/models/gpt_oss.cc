// GptOssForCausalLM: a Llama-shaped pre-norm decoder with
//   attention   q/k/v/o biases, one learned sink logit per head (joins the softmax denominator, then dropped),
//               sliding-window and full layers alternating by layer_types, YaRN RoPE (rope_theta 150000 when the
//               config leaves it out, as GptOssConfig's default)
//   feed-forward a GptOssMoe on every layer: biased router, softmax over the top-k logits, fused experts with
//               the clamped SwiGLU (swiglu_alpha, swiglu_limit)
// Only dense (f32 / bf16 / f16) expert tensors load; the MXFP4 "_blocks" / "_scales" form of the released
// checkpoints is rejected with a LoadError naming it.
#include <algorithm>

#include "layers/gpt_oss_moe.h"
#include "loader/load_error.h"
#include "models/decoder.h"
#include "models/describe.h"
#include "models/hf_config.h"
#include "models/llama_layout.h"
#include "models/registry.h"

namespace attnzoo {
namespace {

// Shared by the builder and describe_gpt_oss: the shape fields, validated.
ModelInfo read_info(const Config& root, const Config& c, const LoadOptions& options) {
  ModelInfo info = read_model_info(root, c, options, "", /*with_intermediate=*/true);
  if (info.hidden_size <= 0 || info.intermediate_size <= 0 || c.get_int("num_local_experts") <= 0 ||
      info.num_layers <= 0 || info.num_heads <= 0 || info.num_kv_heads <= 0 || info.head_dim <= 0 || info.vocab_size <= 0)
    throw LoadError(c.source() + ": sizes (hidden_size, intermediate_size, num_local_experts, num_*, head_dim, "
                    "vocab_size) must be positive");
  return info;
}

AttentionConfig attention_config(const ModelInfo& info, const Config& c, int64_t i, const LoadOptions& options) {
  return model_attention_config(info, layer_window(c, i, info.num_layers), options);
}

}  // namespace

std::unique_ptr<Model> build_gpt_oss(ModelFiles files, const LoadOptions& options) {
  const Config c = files.config().text_config();
  ModelInfo info = read_info(files.config(), c, options);
  const float eps = float(c.get_float_or("rms_norm_eps", 1e-5));
  const int64_t H = info.hidden_size, I = info.intermediate_size, D = info.head_dim;
  const int64_t E = c.get_int("num_local_experts");
  const int64_t qw = info.num_heads * D, kw = info.num_kv_heads * D;
  RopeConfig rc = read_rope(c, D);
  const bool has_theta = c.has("rope_theta") || (c.has("rope_parameters") && c.sub("rope_parameters").has("rope_theta")) ||
                         (c.has("rope_scaling") && c.sub("rope_scaling").has("rope_theta"));
  if (!has_theta) rc.theta = 150000.0;
  const Rope rope(rc);
  GptOssMoeConfig mc;
  mc.top_k = c.get_int_or("num_experts_per_tok", 4);
  mc.alpha = float(c.get_float_or("swiglu_alpha", 1.702));
  mc.limit = float(c.get_float_or("swiglu_limit", 7.0));

  count_checkpoint(files, info);

  uint64_t owned = 0;
  auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    return load_linear(files, name, out, in, options.weights, &owned);
  };

  LlamaLayoutParts parts;
  parts.norm_eps = eps;
  parts.mixer = [&](int64_t i, const std::string& p) -> std::unique_ptr<SequenceMixer> {
    const std::string a = p + ".self_attn";
    const AttentionConfig ac = attention_config(info, c, i, options);
    auto attn = std::make_unique<AttentionLayer>(ac, linear(a + ".q_proj", qw, H), linear(a + ".k_proj", kw, H),
                                                 linear(a + ".v_proj", kw, H), linear(a + ".o_proj", H, qw),
                                                 std::nullopt, std::nullopt, rope, a);
    attn->set_sinks(weight(files, a + ".sinks", {info.num_heads}), a + ".sinks");
    return attn;
  };
  parts.ffn = [&](int64_t, const std::string& p) -> std::unique_ptr<FeedForward> {
    const std::string m = p + ".mlp";
    const std::string x = m + ".experts";
    if (files.has(x + ".gate_up_proj_blocks"))
      throw LoadError(x + ".gate_up_proj_blocks: MXFP4-quantized experts are not supported; dequantize the "
                      "checkpoint to bf16 first");
    GptOssExpertTensors et;
    et.gate_up = weight(files, x + ".gate_up_proj", {E, H, 2 * I});
    et.gate_up_bias = weight(files, x + ".gate_up_proj_bias", {E, 2 * I});
    et.down = weight(files, x + ".down_proj", {E, I, H});
    et.down_bias = weight(files, x + ".down_proj_bias", {E, H});
    auto moe = std::make_unique<GptOssMoe>(mc, linear(m + ".router", E, H), et, options.weights, m);
    owned += moe->owned_weight_bytes();
    return moe;
  };
  return assemble_llama_layout(std::move(files), c, std::move(info), parts, options.weights, owned);
}

ModelDescription describe_gpt_oss(const Config& root, const LoadOptions& options) {
  const Config c = root.text_config();
  ModelDescription d;
  d.info = read_info(root, c, options);
  AttentionConfig full = attention_config(d.info, c, 0, options);
  full.window = 0;
  d.attention = full;
  for (int64_t i = 0; i < d.info.num_layers; ++i) {
    const AttentionConfig ac = attention_config(d.info, c, i, options);
    d.info.layers.push_back({AttentionLayer::kind_of(ac), ac.window, AttentionLayer::spec(ac)});
  }
  d.info.tied_embeddings = config_ties_embeddings(root, c, false);
  return d;
}

}  // namespace attnzoo
