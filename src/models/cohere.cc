// CohereForCausalLM (Command-R) and Cohere2ForCausalLM (Command R7B, Command A), as transformers runs them:
//   h = LayerNorm(x) (mean-centered, weight only); x += attn(h) + mlp(h)   (parallel block, SwiGLU MLP)
//   logits = lm_head(LayerNorm(x)) * logit_scale, the head tied to the embedding unless lm_head exists
// RoPE rotates interleaved channel pairs (2i, 2i + 1), GPT-J style. Cohere2 windows its layers by layer_types (older
// configs: every sliding_window_pattern-th layer, default 4, is global) and rotates only the sliding ones: its global
// layers are NoPE. Command-R+'s per-head q / k LayerNorms (use_qk_norm) are refused.
#include <algorithm>

#include "layers/activations.h"
#include "loader/load_error.h"
#include "models/decoder.h"
#include "models/describe.h"
#include "models/hf_config.h"
#include "models/registry.h"

namespace attnzoo {
namespace {

struct CohereShape {
  ModelInfo info;
  bool cohere2 = false;
  float eps = 1e-5f;
  float logit_scale = 1.f;
  std::vector<bool> sliding;  // per layer (Cohere2)
  int64_t window = 0;
};

CohereShape read_shape(const Config& root, const Config& c, const LoadOptions& options) {
  CohereShape s;
  s.info = read_dense_model_info(root, c, options, "");
  ModelInfo& info = s.info;
  s.cohere2 = info.architecture == "Cohere2ForCausalLM";
  // transformers' Cohere2Config derives head_dim from the hidden size whatever the file says; Cohere reads the file's
  // (read_dense_model_info) when it names one.
  if (s.cohere2 || !c.has("head_dim")) info.head_dim = info.hidden_size / info.num_heads;
  if (info.head_dim <= 0)
    throw LoadError(c.source() + ": head_dim (or hidden_size / num_attention_heads) must be positive");
  if (c.get_bool_or("use_qk_norm", false))
    throw LoadError(c.source() + ": key 'use_qk_norm': Cohere's per-head q / k LayerNorms are not supported");
  s.eps = float(c.get_float_or("layer_norm_eps", 1e-5));
  s.logit_scale = float(c.get_float_or("logit_scale", 0.0625));
  if (!s.cohere2) return s;
  s.window = c.get_int_or("sliding_window", 4096);
  if (s.window <= 0) throw LoadError(c.source() + ": key 'sliding_window': must be positive");
  if (c.has("layer_types")) {
    const auto types = c.get_string_list("layer_types");
    if (int64_t(types.size()) != info.num_layers)
      throw LoadError(c.source() + ": key 'layer_types': expected " + std::to_string(info.num_layers) + " entries");
    for (const std::string& t : types) {
      if (t != "sliding_attention" && t != "full_attention")
        throw LoadError(c.source() + ": key 'layer_types': unknown layer type '" + t + "'");
      s.sliding.push_back(t == "sliding_attention");
    }
  } else {
    const int64_t pattern = c.get_int_or("sliding_window_pattern", 4);
    if (pattern <= 0) throw LoadError(c.source() + ": key 'sliding_window_pattern': must be positive");
    for (int64_t i = 0; i < info.num_layers; ++i) s.sliding.push_back((i + 1) % pattern != 0);
  }
  return s;
}

bool sliding(const CohereShape& s, int64_t i) { return s.cohere2 && s.sliding[size_t(i)]; }

AttentionConfig attention_config(const CohereShape& s, int64_t i, const LoadOptions& options) {
  return model_attention_config(s.info, sliding(s, i) ? s.window : 0, options);
}

}  // namespace

std::unique_ptr<Model> build_cohere(ModelFiles files, const LoadOptions& options) {
  const Config c = files.config().text_config();
  const CohereShape shape = read_shape(files.config(), c, options);
  ModelInfo info = shape.info;
  const Activation act = parse_activation(c.get_string_or("hidden_act", "silu"));
  const int64_t H = info.hidden_size, I = info.intermediate_size, D = info.head_dim;
  const int64_t qw = info.num_heads * D, kw = info.num_kv_heads * D;
  RopeConfig rc = read_rope(c, D, kWholeHead);
  rc.layout = RopeLayout::interleaved;
  RopeConfig none;
  none.type = "none";
  none.head_dim = D;
  const Rope rope(rc), nope(none);
  count_checkpoint(files, info);

  WeightBytes owned;
  auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    return load_linear(files, name, out, in, options.weights, &owned);
  };
  auto norm = [&](const std::string& name) {
    return RmsNorm::mean_centered(weight(files, name + ".weight", {H}), shape.eps, name);
  };
  Embedding embed = load_embedding(files, "model.embed_tokens.weight", info.vocab_size, H);
  std::vector<DecoderBlock> blocks;
  for (int64_t i = 0; i < info.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i), a = p + ".self_attn", m = p + ".mlp";
    DecoderBlock block;
    block.input_norm = norm(p + ".input_layernorm");
    block.mixer = std::make_unique<AttentionLayer>(
        attention_config(shape, i, options), linear(a + ".q_proj", qw, H), linear(a + ".k_proj", kw, H),
        linear(a + ".v_proj", kw, H), linear(a + ".o_proj", H, qw), std::nullopt, std::nullopt,
        !shape.cohere2 || sliding(shape, i) ? rope : nope, a);
    info.layers.push_back({block.mixer->kind(), block.mixer->window(), block.mixer->cache_spec()});
    block.ffn = std::make_unique<GatedMlp>(linear(m + ".gate_proj", I, H), linear(m + ".up_proj", I, H),
                                           linear(m + ".down_proj", H, I), act, m);
    block.parallel = true;
    blocks.push_back(std::move(block));
  }
  DecoderOptions opts;
  opts.logits_scale = shape.logit_scale;
  return finish_decoder(std::move(files), c, std::move(info), std::move(embed), std::move(blocks), norm("model.norm"),
                        /*tie_fallback=*/true, options.weights, owned, opts);
}

ModelDescription describe_cohere(const Config& root, const LoadOptions& options) {
  const Config c = root.text_config();
  const CohereShape s = read_shape(root, c, options);
  (void)read_rope(c, s.info.head_dim, kWholeHead);  // a bad rope config fails here as in the builder
  ModelDescription d;
  d.info = s.info;
  d.attention = attention_config(s, 0, options);
  d.info.tied_embeddings = config_ties_embeddings(root, c, true);
  const int64_t H = d.info.hidden_size, I = d.info.intermediate_size, V = d.info.vocab_size;
  const int64_t qw = d.info.num_heads * d.info.head_dim, kw = d.info.num_kv_heads * d.info.head_dim;
  const bool bias = c.get_bool_or("attention_bias", false);
  Checked params = Checked(V) * H * (d.info.tied_embeddings ? 1 : 2) + H;
  for (int64_t i = 0; i < d.info.num_layers; ++i) {
    const AttentionConfig ac = attention_config(s, i, options);
    d.info.layers.push_back({AttentionLayer::kind_of(ac), ac.window, AttentionLayer::spec(ac)});
    params += Checked(H) + linear_params(qw, H, bias) + 2 * linear_params(kw, H, bias) + linear_params(H, qw, bias) +
              Checked(3) * I * H;
  }
  d.info.parameter_count = params.value();
  d.parameters_estimated = true;
  return d;
}

}  // namespace attnzoo
