// Glm4ForCausalLM (GLM-4-0414), as transformers runs it: four RMSNorms per block,
//   x += post_self_attn_layernorm(attn(input_layernorm(x)))
//   x += post_mlp_layernorm(mlp(post_attention_layernorm(x)))
// q / k / v biases (attention_bias), Phi-3's fused mlp.gate_up_proj [gate (I) ; up (I)] split into row views, and
// RoPE on the first partial_rotary_factor of each head with interleaved channel pairs (2i, 2i + 1).
#include "layers/activations.h"
#include "models/decoder.h"
#include "models/describe.h"
#include "models/hf_config.h"
#include "models/registry.h"

namespace attnzoo {

std::unique_ptr<Model> build_glm4(ModelFiles files, const LoadOptions& options) {
  const Config c = files.config().text_config();
  ModelInfo info = read_dense_model_info(files.config(), c, options, "glm4");
  const float eps = float(c.get_float_or("rms_norm_eps", 1e-6));
  const Activation act = parse_activation(c.get_string_or("hidden_act", "silu"));
  const int64_t H = info.hidden_size, I = info.intermediate_size, D = info.head_dim;
  const int64_t qw = info.num_heads * D, kw = info.num_kv_heads * D;
  RopeConfig rc = read_rope(c, D, rotary_share("glm4"));
  rc.layout = RopeLayout::interleaved;
  const Rope rope(rc);
  count_checkpoint(files, info);

  WeightBytes owned;
  auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    return load_linear(files, name, out, in, options.weights, &owned);
  };
  auto norm = [&](const std::string& name) { return RmsNorm(weight(files, name + ".weight", {H}), eps, false, name); };
  Embedding embed = load_embedding(files, "model.embed_tokens.weight", info.vocab_size, H);
  std::vector<DecoderBlock> blocks;
  for (int64_t i = 0; i < info.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i), a = p + ".self_attn", m = p + ".mlp";
    DecoderBlock block;
    block.input_norm = norm(p + ".input_layernorm");
    block.mixer = std::make_unique<AttentionLayer>(
        model_attention_config(info, 0, options), linear(a + ".q_proj", qw, H), linear(a + ".k_proj", kw, H),
        linear(a + ".v_proj", kw, H), linear(a + ".o_proj", H, qw), std::nullopt, std::nullopt, rope, a);
    info.layers.push_back({block.mixer->kind(), block.mixer->window(), block.mixer->cache_spec()});
    block.post_mixer_norm.emplace(norm(p + ".post_self_attn_layernorm"));
    block.pre_ffn_norm.emplace(norm(p + ".post_attention_layernorm"));
    const std::string gate_up = m + ".gate_up_proj";
    block.ffn = std::make_unique<GatedMlp>(load_linear_rows(files, gate_up, 2 * I, 0, I, H, options.weights, &owned),
                                           load_linear_rows(files, gate_up, 2 * I, I, I, H, options.weights, &owned),
                                           linear(m + ".down_proj", H, I), act, m);
    block.post_ffn_norm.emplace(norm(p + ".post_mlp_layernorm"));
    blocks.push_back(std::move(block));
  }
  return finish_decoder(std::move(files), c, std::move(info), std::move(embed), std::move(blocks), norm("model.norm"),
                        /*tie_fallback=*/false, options.weights, owned);
}

ModelDescription describe_glm4(const Config& root, const LoadOptions& options) {
  const Config c = root.text_config();
  ModelDescription d;
  d.info = read_dense_model_info(root, c, options, "glm4");
  (void)read_rope(c, d.info.head_dim, rotary_share("glm4"));  // a bad rope config fails here as in the builder
  const int64_t H = d.info.hidden_size, I = d.info.intermediate_size, V = d.info.vocab_size;
  const int64_t qw = d.info.num_heads * d.info.head_dim, kw = d.info.num_kv_heads * d.info.head_dim;
  d.attention = model_attention_config(d.info, 0, options);
  d.info.tied_embeddings = config_ties_embeddings(root, c, false);
  const bool bias = c.get_bool_or("attention_bias", true);
  Checked params = Checked(V) * H * (d.info.tied_embeddings ? 1 : 2) + H;
  for (int64_t i = 0; i < d.info.num_layers; ++i) {
    d.info.layers.push_back({AttentionLayer::kind_of(*d.attention), 0, AttentionLayer::spec(*d.attention)});
    // q / k / v (biased), o, four norms, gate_up and down
    params += linear_params(qw, H, bias) + 2 * linear_params(kw, H, bias) + linear_params(H, qw) + Checked(4) * H +
              Checked(3) * I * H;
  }
  d.info.parameter_count = params.value();
  d.parameters_estimated = true;
  return d;
}

}  // namespace attnzoo
