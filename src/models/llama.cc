// LlamaForCausalLM and its close relatives, which differ only in switches read from config.json / the tensors:
//   Qwen2   q/k/v biases (found by tensor presence; Llama's attention_bias adds o_proj's too)
//   Qwen3   per-head RMSNorm on q and k before RoPE (q_norm / k_norm), explicit head_dim
//   Mistral sliding_window on every layer; Qwen2/3 may window some layers via layer_types
#include <algorithm>

#include "layers/activations.h"
#include "loader/load_error.h"
#include "models/decoder.h"
#include "models/registry.h"

namespace attnzoo {
namespace {

// RoPE settings: "rope_parameters" (transformers >= 5) or "rope_scaling" (older), with rope_theta and
// partial_rotary_factor either inside it or at the top level, as transformers' standardize_rope_params reads them.
RopeConfig read_rope(const Config& c, int64_t head_dim) {
  RopeConfig r;
  r.head_dim = head_dim;
  const bool nested = c.has("rope_parameters");
  const bool scaling = !nested && c.has("rope_scaling");
  const Config p = nested ? c.sub("rope_parameters") : scaling ? c.sub("rope_scaling") : c;
  r.theta = p.get_float_or("rope_theta", c.get_float_or("rope_theta", 10000.0));
  r.type = p.get_string_or("rope_type", p.get_string_or("type", "default"));
  const double partial = p.get_float_or("partial_rotary_factor", c.get_float_or("partial_rotary_factor", 1.0));
  r.rotary_dim = int64_t(double(head_dim) * partial);
  if (r.type == "llama3" || r.type == "yarn") {
    const int64_t max_pos = c.get_int_or("max_position_embeddings", 0);
    r.original_max_position_embeddings =
        p.get_int_or("original_max_position_embeddings", c.get_int_or("original_max_position_embeddings", max_pos));
    r.factor = p.has("factor") ? p.get_float("factor")
                               : double(max_pos) / double(std::max<int64_t>(1, r.original_max_position_embeddings));
    r.low_freq_factor = p.get_float_or("low_freq_factor", 1.0);
    r.high_freq_factor = p.get_float_or("high_freq_factor", 4.0);
    r.beta_fast = p.get_float_or("beta_fast", 32.0);
    r.beta_slow = p.get_float_or("beta_slow", 1.0);
    r.attention_factor = p.get_float_or("attention_factor", 0.0);
    r.mscale = p.get_float_or("mscale", 0.0);
    r.mscale_all_dim = p.get_float_or("mscale_all_dim", 0.0);
    r.truncate = p.get_bool_or("truncate", true);
  } else if (r.type != "default") {
    throw LoadError(c.source() + ": rope type '" + r.type + "' is not supported (default, llama3, yarn)");
  }
  return r;
}

// Sliding window of layer i, 0 for full attention.
int64_t layer_window(const Config& c, int64_t i, int64_t num_layers) {
  const int64_t window = c.get_int_or("sliding_window", 0);
  if (c.has("layer_types")) {
    const auto types = c.get_string_list("layer_types");
    if (int64_t(types.size()) != num_layers)
      throw LoadError(c.source() + ": key 'layer_types': expected " + std::to_string(num_layers) + " entries");
    return types[size_t(i)] == "sliding_attention" ? window : 0;
  }
  if (c.has("use_sliding_window") && !c.get_bool("use_sliding_window")) return 0;
  return window;
}

}  // namespace

std::unique_ptr<Model> build_llama_family(ModelFiles files, const LoadOptions& options) {
  const Config c = files.config().text_config();
  ModelInfo info;
  info.architecture = files.config().get_string_list("architectures")[0];
  info.model_type = c.get_string_or("model_type", "");
  info.hidden_size = c.get_int("hidden_size");
  info.intermediate_size = c.get_int("intermediate_size");
  info.num_layers = c.get_int("num_hidden_layers");
  info.num_heads = c.get_int("num_attention_heads");
  info.num_kv_heads = c.get_int_or("num_key_value_heads", info.num_heads);
  info.head_dim = c.get_int_or("head_dim", info.hidden_size / std::max<int64_t>(1, info.num_heads));
  info.vocab_size = c.get_int("vocab_size");
  info.max_position_embeddings = c.get_int_or("max_position_embeddings", 0);
  info.checkpoint_dtype = c.dtype();
  info.weights = options.weights;
  const float eps = float(c.get_float_or("rms_norm_eps", 1e-6));
  const Activation act = parse_activation(c.get_string_or("hidden_act", "silu"));
  const int64_t H = info.hidden_size, I = info.intermediate_size, D = info.head_dim;
  const int64_t qw = info.num_heads * D, kw = info.num_kv_heads * D;
  if (H <= 0 || I <= 0 || info.num_layers <= 0 || info.num_heads <= 0 || info.num_kv_heads <= 0 || D <= 0 ||
      info.vocab_size <= 0)
    throw LoadError(c.source() + ": sizes (hidden_size, intermediate_size, num_*, head_dim, vocab_size) must be positive");
  const Rope rope(read_rope(c, D));

  for (const auto& t : files.names()) {
    const TensorInfo& ti = files.info(t);
    info.parameter_count += ti.numel();
    info.checkpoint_bytes += ti.nbytes();
  }

  uint64_t owned = 0;
  auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    Linear l = Linear::from_weights(weight(files, name + ".weight", {out, in}),
                                    optional_weight(files, name + ".bias", {out}), name, options.weights);
    if (l.owns_weight()) owned += l.weight_bytes();
    return l;
  };

  Embedding embed(weight(files, "model.embed_tokens.weight", {info.vocab_size, H}), "model.embed_tokens.weight");
  std::vector<DecoderBlock> blocks;
  for (int64_t i = 0; i < info.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i);
    const std::string a = p + ".self_attn";
    AttentionConfig ac{H, info.num_heads, info.num_kv_heads, D, layer_window(c, i, info.num_layers)};
    ac.cache_block_tokens = options.kv_block_tokens;
    std::optional<RmsNorm> qn, kn;
    if (files.has(a + ".q_norm.weight")) qn.emplace(weight(files, a + ".q_norm.weight", {D}), eps, false, a + ".q_norm");
    if (files.has(a + ".k_norm.weight")) kn.emplace(weight(files, a + ".k_norm.weight", {D}), eps, false, a + ".k_norm");
    AttentionLayer attn(ac, linear(a + ".q_proj", qw, H), linear(a + ".k_proj", kw, H), linear(a + ".v_proj", kw, H),
                        linear(a + ".o_proj", H, qw), std::move(qn), std::move(kn), rope, a);
    const std::string m = p + ".mlp";
    GatedMlp mlp(linear(m + ".gate_proj", I, H), linear(m + ".up_proj", I, H), linear(m + ".down_proj", H, I), act, m);
    info.layers.push_back({ac.window > 0 ? "sliding_attention" : "attention", ac.window, attn.cache_spec()});
    blocks.push_back({RmsNorm(weight(files, p + ".input_layernorm.weight", {H}), eps, false, p + ".input_layernorm"),
                      std::move(attn),
                      RmsNorm(weight(files, p + ".post_attention_layernorm.weight", {H}), eps, false,
                              p + ".post_attention_layernorm"),
                      std::move(mlp)});
  }
  RmsNorm norm(weight(files, "model.norm.weight", {H}), eps, false, "model.norm");
  info.tied_embeddings = c.get_bool_or("tie_word_embeddings", false) || !files.has("lm_head.weight");
  Linear lm_head = info.tied_embeddings
                       ? Linear::from_weights(embed.table(), {}, "model.embed_tokens.weight", options.weights)
                       : linear("lm_head", info.vocab_size, H);
  if (info.tied_embeddings && lm_head.owns_weight()) owned += lm_head.weight_bytes();
  info.owned_weight_bytes = owned;
  return std::make_unique<DecoderModel>(std::move(files), std::move(info), std::move(embed), std::move(blocks),
                                        std::move(norm), std::move(lm_head));
}

}  // namespace attnzoo
