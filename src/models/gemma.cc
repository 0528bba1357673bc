// GemmaForCausalLM, Gemma2ForCausalLM and Gemma3ForCausalLM (text, model_type gemma3_text), as transformers runs
// them:
//   x = embed(tokens) * sqrt(hidden)  (the factor rounded to the embedding dtype first, as transformers does)
//   per block: x += post_attention_layernorm(attn(input_layernorm(x)))
//              x += post_feedforward_layernorm(mlp(pre_feedforward_layernorm(x)))   (all RMSNorms are (1 + w))
//   Gemma 1: the plain pre-norm block, x += attn(input_layernorm(x)); x += mlp(post_attention_layernorm(x)),
//            scale head_dim^-0.5, every layer full attention, no softcaps
//   attention: scale query_pre_attn_scalar^-0.5, Gemma 2's optional attn_logit_softcapping, sliding/full layers from
//              layer_types (or the older pattern: Gemma 2 alternates, Gemma 3 every sliding_window_pattern-th
//              layer is full); Gemma 3 adds (1 + w) q/k norms and a separate RoPE base for sliding layers
//   logits = final_logit_softcapping?(lm_head(norm(x))), the head tied to the embedding unless lm_head exists.
#include <algorithm>
#include <cmath>

#include "layers/activations.h"
#include "loader/load_error.h"
#include "models/decoder.h"
#include "models/describe.h"
#include "models/hf_config.h"
#include "models/output_head.h"
#include "models/registry.h"

namespace attnzoo {
namespace {

bool is_sliding(const Config& c, int64_t i, int64_t num_layers, bool gemma3) {
  if (c.has("layer_types")) {
    const auto types = c.get_string_list("layer_types");
    if (int64_t(types.size()) != num_layers)
      throw LoadError(c.source() + ": key 'layer_types': expected " + std::to_string(num_layers) + " entries");
    const std::string& t = types[size_t(i)];
    if (t != "sliding_attention" && t != "full_attention")
      throw LoadError(c.source() + ": key 'layer_types': unknown layer type '" + t + "'");
    return t == "sliding_attention";
  }
  // Configs written before layer_types existed: the pattern transformers fills in.
  const int64_t pattern = gemma3 ? c.get_int_or("sliding_window_pattern", 6) : 2;
  if (pattern <= 0) throw LoadError(c.source() + ": key 'sliding_window_pattern': must be positive");
  return (i + 1) % pattern != 0;
}

// Gemma 3 keeps one RoPE per layer type. transformers >= 5 writes rope_parameters: {"full_attention": {...},
// "sliding_attention": {...}}; older configs have rope_theta (+ rope_scaling) for full layers and
// rope_local_base_freq for sliding ones. Defaults are transformers' (1e6 global, 1e4 local).
RopeConfig gemma3_rope(const Config& c, int64_t head_dim, bool sliding) {
  const char* type = sliding ? "sliding_attention" : "full_attention";
  const double default_theta = sliding ? 10000.0 : 1000000.0;
  if (c.has("rope_parameters") && c.sub("rope_parameters").has(type)) {
    const Config p = c.sub("rope_parameters").sub(type);
    RopeConfig r = read_rope(p, head_dim, kWholeHead);
    if (!p.has("rope_theta")) r.theta = default_theta;
    return r;
  }
  if (sliding) {
    RopeConfig r;
    r.head_dim = head_dim;
    r.rotary_dim = head_dim;
    r.theta = c.get_float_or("rope_local_base_freq", default_theta);
    return r;
  }
  RopeConfig r = read_rope(c, head_dim, kWholeHead);
  if (!c.has("rope_theta")) r.theta = default_theta;
  return r;
}

// transformers multiplies by torch.tensor(sqrt(hidden)).to(embedding dtype): round the factor the same way.
float embedding_scale(int64_t hidden, DType table_dtype) {
  float s = float(std::sqrt(double(hidden)));  // Python computes hidden ** 0.5 in double
  if (table_dtype == DType::bf16 || table_dtype == DType::f16) {
    uint16_t buf = 0;
    store_from_f32(&buf, table_dtype, 0, s);
    s = load_as_f32(&buf, table_dtype, 0);
  }
  return s;
}

// Everything the builder reads from config.json (`c`: the text config), shared with describe_gemma.
struct GemmaShape {
  ModelInfo info;
  bool gemma3 = false;
  bool gemma1 = false;  // no sandwich norms, no sliding layers, no softcaps
  float eps = 1e-6f;
  Activation act = Activation::gelu_tanh;
  double pre_attn_scalar = 256.0, attn_softcap = 0.0, final_softcap = 0.0;
  int64_t window = 0;
};

GemmaShape read_shape(const Config& root, const Config& c, const LoadOptions& options) {
  GemmaShape s;
  ModelInfo& info = s.info;
  info.architecture = root.get_string_list("architectures")[0];
  info.model_type = c.get_string_or("model_type", "");
  s.gemma3 = info.architecture == "Gemma3ForCausalLM" || info.model_type == "gemma3_text";
  s.gemma1 = info.architecture == "GemmaForCausalLM";
  info.hidden_size = c.get_int("hidden_size");
  info.intermediate_size = c.get_int("intermediate_size");
  info.num_layers = c.get_int("num_hidden_layers");
  info.num_heads = c.get_int("num_attention_heads");
  info.num_kv_heads = c.get_int_or("num_key_value_heads", info.num_heads);
  info.head_dim = c.get_int_or("head_dim", 256);
  info.vocab_size = c.get_int("vocab_size");
  info.max_position_embeddings = context_length(c);
  info.checkpoint_dtype = c.dtype();
  info.weights = options.weights;
  s.eps = float(c.get_float_or("rms_norm_eps", 1e-6));
  std::string act = c.get_string_or("hidden_activation", c.get_string_or("hidden_act", "gelu_pytorch_tanh"));
  // Gemma 1's releases say "gelu" and mean the tanh approximation; transformers' GemmaConfig rewrites it so.
  if (s.gemma1 && act == "gelu") act = "gelu_pytorch_tanh";
  s.act = parse_activation(act);
  const int64_t H = info.hidden_size, I = info.intermediate_size, D = info.head_dim;
  if (H <= 0 || I <= 0 || info.num_layers <= 0 || info.num_heads <= 0 || info.num_kv_heads <= 0 || D <= 0 ||
      info.vocab_size <= 0)
    throw LoadError(c.source() + ": sizes (hidden_size, intermediate_size, num_*, head_dim, vocab_size) must be positive");
  if (c.get_bool_or("use_bidirectional_attention", false))
    throw LoadError(c.source() + ": key 'use_bidirectional_attention': bidirectional Gemma is not supported");
  const double pre_attn_scalar = s.pre_attn_scalar =
      s.gemma1 ? double(D) : c.get_float_or("query_pre_attn_scalar", 256.0);
  if (!(pre_attn_scalar > 0)) throw LoadError(c.source() + ": key 'query_pre_attn_scalar': must be positive");
  if (s.gemma1) return s;  // transformers' GemmaConfig has none of the keys below
  // Gemma 3's attention never passes the cap transformers' config still carries (its releases set none).
  const double attn_softcap = s.attn_softcap = s.gemma3 ? 0.0 : c.get_float_or("attn_logit_softcapping", 0.0);
  const double final_softcap = s.final_softcap = c.get_float_or("final_logit_softcapping", 0.0);
  if (attn_softcap < 0 || final_softcap < 0)
    throw LoadError(c.source() + ": softcapping values (attn_logit_softcapping, final_logit_softcapping) must be >= 0");
  const int64_t window = s.window = c.get_int_or("sliding_window", 4096);
  if (window <= 0) throw LoadError(c.source() + ": key 'sliding_window': must be positive");
  return s;
}

AttentionConfig attention_config(const GemmaShape& s, const Config& c, int64_t i, const LoadOptions& options) {
  const ModelInfo& info = s.info;
  const bool sliding = !s.gemma1 && is_sliding(c, i, info.num_layers, s.gemma3);
  AttentionConfig ac = model_attention_config(info, sliding ? s.window : 0, options);
  ac.scale = float(1.0 / std::sqrt(s.pre_attn_scalar));
  ac.softcap = float(s.attn_softcap);
  return ac;
}

}  // namespace

std::unique_ptr<Model> build_gemma(ModelFiles files, const LoadOptions& options) {
  const Config c = files.config().text_config();
  const GemmaShape shape = read_shape(files.config(), c, options);
  ModelInfo info = shape.info;
  const bool gemma3 = shape.gemma3;
  const float eps = shape.eps;
  const Activation act = shape.act;
  const double final_softcap = shape.final_softcap;
  const int64_t H = info.hidden_size, I = info.intermediate_size, D = info.head_dim;
  const int64_t qw = info.num_heads * D, kw = info.num_kv_heads * D;

  const Rope global_rope(gemma3 ? gemma3_rope(c, D, false) : read_rope(c, D, kWholeHead));
  const Rope local_rope(gemma3 ? gemma3_rope(c, D, true) : read_rope(c, D, kWholeHead));

  count_checkpoint(files, info);

  WeightBytes owned;
  auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    return load_linear(files, name, out, in, options.weights, &owned);
  };
  auto norm = [&](const std::string& name, int64_t dim) {
    return RmsNorm(weight(files, name + ".weight", {dim}), eps, true, name);
  };

  Embedding embed = load_embedding(files, "model.embed_tokens.weight", info.vocab_size, H);
  std::vector<DecoderBlock> blocks;
  for (int64_t i = 0; i < info.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i);
    const std::string a = p + ".self_attn";
    const bool sliding = !shape.gemma1 && is_sliding(c, i, info.num_layers, gemma3);
    const AttentionConfig ac = attention_config(shape, c, i, options);
    std::optional<RmsNorm> qn, kn;
    if (gemma3) {
      qn.emplace(norm(a + ".q_norm", D));
      kn.emplace(norm(a + ".k_norm", D));
    }
    auto attn = std::make_unique<AttentionLayer>(ac, linear(a + ".q_proj", qw, H), linear(a + ".k_proj", kw, H),
                                                 linear(a + ".v_proj", kw, H), linear(a + ".o_proj", H, qw),
                                                 std::move(qn), std::move(kn),
                                                 sliding && gemma3 ? local_rope : global_rope, a);
    const std::string m = p + ".mlp";
    auto mlp = std::make_unique<GatedMlp>(linear(m + ".gate_proj", I, H), linear(m + ".up_proj", I, H),
                                          linear(m + ".down_proj", H, I), act, m);
    info.layers.push_back({attn->kind(), attn->window(), attn->cache_spec()});
    DecoderBlock block;
    block.input_norm = norm(p + ".input_layernorm", H);
    block.mixer = std::move(attn);
    block.ffn = std::move(mlp);
    if (shape.gemma1) {
      block.pre_ffn_norm.emplace(norm(p + ".post_attention_layernorm", H));
    } else {
      block.post_mixer_norm.emplace(norm(p + ".post_attention_layernorm", H));
      block.pre_ffn_norm.emplace(norm(p + ".pre_feedforward_layernorm", H));
      block.post_ffn_norm.emplace(norm(p + ".post_feedforward_layernorm", H));
    }
    blocks.push_back(std::move(block));
  }
  RmsNorm final_norm = norm("model.norm", H);
  info.tied_embeddings = ties_embeddings(files, c, true);
  Linear lm_head =
      load_output_head(files, embed, "model.embed_tokens.weight", info.tied_embeddings, options.weights, &owned);
  owned.record(info);
  DecoderOptions opts;
  // A block-quantized table has no narrow dtype to round the scale to: it stays f32 (as llama.cpp computes it).
  opts.embedding_scale = embedding_scale(H, embed.is_quantized() ? DType::f32 : embed.table().dtype);
  opts.final_logit_softcap = float(final_softcap);
  return std::make_unique<DecoderModel>(std::move(files), std::move(info), std::move(embed), std::move(blocks),
                                        std::move(final_norm), std::move(lm_head), opts);
}

ModelDescription describe_gemma(const Config& root, const LoadOptions& options) {
  const Config c = root.text_config();
  const GemmaShape s = read_shape(root, c, options);
  ModelDescription d;
  d.info = s.info;
  AttentionConfig full = attention_config(s, c, 0, options);
  full.window = 0;
  d.attention = full;
  for (int64_t i = 0; i < d.info.num_layers; ++i) {
    const AttentionConfig ac = attention_config(s, c, i, options);
    d.info.layers.push_back({AttentionLayer::kind_of(ac), ac.window, AttentionLayer::spec(ac)});
  }
  d.info.tied_embeddings = config_ties_embeddings(root, c, true);
  return d;
}

}  // namespace attnzoo
