// Olmo2ForCausalLM (OLMo 2), as transformers runs it: the norms move from the sublayers' inputs to their outputs,
//   x += post_attention_layernorm(attn(x)); x += post_feedforward_layernorm(mlp(x))
// and q / k are RMS-normed across all heads at once (q_norm [num_heads * head_dim], k_norm [num_kv_heads *
// head_dim]) before RoPE. Otherwise Llama's: SwiGLU MLP, plain RMSNorms, model.norm and an untied lm_head.
#include "layers/activations.h"
#include "models/decoder.h"
#include "models/describe.h"
#include "models/hf_config.h"
#include "models/registry.h"

namespace attnzoo {

std::unique_ptr<Model> build_olmo2(ModelFiles files, const LoadOptions& options) {
  const Config c = files.config().text_config();
  ModelInfo info = read_dense_model_info(files.config(), c, options, "olmo2");
  const float eps = float(c.get_float_or("rms_norm_eps", 1e-6));
  const Activation act = parse_activation(c.get_string_or("hidden_act", "silu"));
  const int64_t H = info.hidden_size, I = info.intermediate_size, D = info.head_dim;
  const int64_t qw = info.num_heads * D, kw = info.num_kv_heads * D;
  const Rope rope(read_rope(c, D, kWholeHead));
  count_checkpoint(files, info);

  WeightBytes owned;
  auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    return load_linear(files, name, out, in, options.weights, &owned);
  };
  auto norm = [&](const std::string& name, int64_t dim) {
    return RmsNorm(weight(files, name + ".weight", {dim}), eps, false, name);
  };
  Embedding embed = load_embedding(files, "model.embed_tokens.weight", info.vocab_size, H);
  std::vector<DecoderBlock> blocks;
  for (int64_t i = 0; i < info.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i), a = p + ".self_attn", m = p + ".mlp";
    DecoderBlock block;
    block.mixer = std::make_unique<AttentionLayer>(
        model_attention_config(info, 0, options), linear(a + ".q_proj", qw, H), linear(a + ".k_proj", kw, H),
        linear(a + ".v_proj", kw, H), linear(a + ".o_proj", H, qw), norm(a + ".q_norm", qw), norm(a + ".k_norm", kw),
        rope, a);
    info.layers.push_back({block.mixer->kind(), block.mixer->window(), block.mixer->cache_spec()});
    block.post_mixer_norm.emplace(norm(p + ".post_attention_layernorm", H));
    block.ffn = std::make_unique<GatedMlp>(linear(m + ".gate_proj", I, H), linear(m + ".up_proj", I, H),
                                           linear(m + ".down_proj", H, I), act, m);
    block.post_ffn_norm.emplace(norm(p + ".post_feedforward_layernorm", H));
    blocks.push_back(std::move(block));
  }
  return finish_decoder(std::move(files), c, std::move(info), std::move(embed), std::move(blocks),
                        norm("model.norm", H), /*tie_fallback=*/false, options.weights, owned);
}

ModelDescription describe_olmo2(const Config& root, const LoadOptions& options) {
  const Config c = root.text_config();
  ModelDescription d;
  d.info = read_dense_model_info(root, c, options, "olmo2");
  (void)read_rope(c, d.info.head_dim, kWholeHead);  // unsupported rope types fail here as in the builder
  const int64_t H = d.info.hidden_size, I = d.info.intermediate_size, V = d.info.vocab_size;
  const int64_t qw = d.info.num_heads * d.info.head_dim, kw = d.info.num_kv_heads * d.info.head_dim;
  d.attention = model_attention_config(d.info, 0, options);
  d.info.tied_embeddings = config_ties_embeddings(root, c, false);
  const bool bias = c.get_bool_or("attention_bias", false);
  Checked params = Checked(V) * H * (d.info.tied_embeddings ? 1 : 2) + H;
  for (int64_t i = 0; i < d.info.num_layers; ++i) {
    d.info.layers.push_back({AttentionLayer::kind_of(*d.attention), 0, AttentionLayer::spec(*d.attention)});
    // q / k / v / o, the two full-width q / k norms, the two block norms and the SwiGLU MLP
    params += linear_params(qw, H, bias) + 2 * linear_params(kw, H, bias) + linear_params(H, qw, bias) +
              Checked(qw) + kw + Checked(2) * H + Checked(3) * I * H;
  }
  d.info.parameter_count = params.value();
  d.parameters_estimated = true;
  return d;
}

}  // namespace attnzoo
