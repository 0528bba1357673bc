// RWKV7ForCausalLM in flash-linear-attention's format (model_type "rwkv7"): tensors under
// model.embeddings / model.layers.N.{pre_norm (N = 0), attn_norm, attn, ffn_norm, ffn} / model.norm, lm_head.
// Shapes follow fla's RWKV7Config: hidden = num_heads * head_dim; value_dim per layer (default hidden);
// intermediate_size (default hidden * hidden_ratio rounded up to 32); LoRA ranks are read off the tensors.
#include <cmath>

#include "loader/load_error.h"
#include "models/backbone_config.h"
#include "models/decoder.h"
#include "models/describe.h"
#include "models/output_head.h"
#include "models/registry.h"
#include "models/rwkv7_model.h"

namespace attnzoo {
namespace {

// fla writes value_dim as a per-layer list; older configs may hold one int or null (= hidden_size).
std::vector<int64_t> read_value_dims(const Config& c, int64_t hidden, int64_t layers) {
  const json::Value* v = c.find("value_dim");
  if (!v) return std::vector<int64_t>(size_t(layers), hidden);
  if (!v->is_array()) return std::vector<int64_t>(size_t(layers), c.get_int("value_dim"));
  std::vector<int64_t> dims = c.get_int_list("value_dim");
  if (int64_t(dims.size()) != layers)
    throw LoadError(c.source() + ": key 'value_dim': expected " + std::to_string(layers) + " entries (one per layer)");
  return dims;
}

// Everything the builder reads from config.json, shared with describe_rwkv7.
struct Rwkv7Shape {
  ModelInfo info;
  Rwkv7TimeMixConfig tc;
  bool norm_first = true, norm_bias = true;
};

Rwkv7Shape read_shape(const Config& c, const LoadOptions& options) {
  Rwkv7Shape s;
  ModelInfo& info = s.info = read_backbone_info(c, options, "rwkv7");
  info.max_position_embeddings = c.get_int_or("max_position_embeddings", 0);
  const int64_t C = info.hidden_size;
  if (C <= 0 || info.num_layers <= 0 || info.vocab_size <= 0)
    throw LoadError(c.source() + ": hidden_size, num_hidden_layers and vocab_size must be positive");
  // As fla's RWKV7Attention: head_dim wins when given, else num_heads.
  int64_t head_dim = c.get_int_or("head_dim", 0), heads = c.get_int_or("num_heads", 0);
  if (head_dim > 0) {
    heads = C % head_dim == 0 ? C / head_dim : 0;
  } else if (heads > 0) {
    head_dim = C % heads == 0 ? C / heads : 0;
  }
  if (head_dim <= 0 || heads <= 0)
    throw LoadError(c.source() + ": head_dim / num_heads must be positive and divide hidden_size (" +
                    std::to_string(C) + ")");
  if (c.has("attn"))
    throw LoadError(c.source() + ": key 'attn': hybrid RWKV-7 + softmax attention layers are not supported");
  const std::string act = c.get_string_or("hidden_act", "sqrelu");
  if (act != "sqrelu") throw LoadError(c.source() + ": hidden_act '" + act + "' is not supported (only sqrelu)");
  int64_t inter = c.get_int_or("intermediate_size", 0);
  if (inter <= 0) {  // fla's RWKV7FeedForward default
    inter = int64_t(double(C) * c.get_float_or("hidden_ratio", 4.0));
    inter = 32 * ((inter + 31) / 32);
  }
  const std::vector<int64_t> value_dims = read_value_dims(c, C, info.num_layers);
  for (int64_t d : value_dims)
    if (d != value_dims[0] || d % heads != 0 || d <= 0)
      throw LoadError(c.source() + ": key 'value_dim': every layer needs the same positive multiple of num_heads "
                                   "(layer 0's values are mixed into every later layer)");
  s.norm_first = c.get_bool_or("norm_first", true);
  s.norm_bias = c.get_bool_or("norm_bias", true);
  info.num_heads = info.num_kv_heads = heads;
  info.head_dim = head_dim;
  info.intermediate_size = inter;
  info.tied_embeddings = c.get_bool_or("tie_word_embeddings", false);
  s.tc.hidden = C;
  s.tc.num_heads = heads;
  s.tc.head_dim = head_dim;
  s.tc.head_v_dim = value_dims[0] / heads;
  s.tc.norm_eps = float(c.get_float_or("norm_eps", 1e-5));
  s.tc.fused_l2norm = c.get_bool_or("fuse_norm", true);
  for (int64_t i = 0; i < info.num_layers; ++i) info.layers.push_back({"rwkv7", 0, Rwkv7Model::cache_spec(s.tc)});
  return s;
}

}  // namespace

std::unique_ptr<Model> build_rwkv7(ModelFiles files, const LoadOptions& options) {
  const Config& c = files.config();
  Rwkv7Shape shape = read_shape(c, options);
  ModelInfo info = std::move(shape.info);
  const Rwkv7TimeMixConfig tc = shape.tc;
  const int64_t C = info.hidden_size, heads = tc.num_heads, head_dim = tc.head_dim, inter = info.intermediate_size;
  const bool norm_first = shape.norm_first, norm_bias = shape.norm_bias;
  const float eps = tc.norm_eps;

  count_checkpoint(files, info);
  WeightBytes owned;
  auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    return load_linear(files, name, out, in, options.weights, &owned);
  };
  auto layer_norm = [&](const std::string& name) {
    return LayerNorm(weight(files, name + ".weight", {C}), norm_bias ? weight(files, name + ".bias", {C}) : TensorView{},
                     eps, name);
  };
  // LoRA ranks are not always in the config (fla derives defaults from hidden_size): take them from the tensor.
  // w, a and v LoRAs end in a bias, g's does not (fla's LoRA(bias=False)).
  auto lora = [&](const std::string& name, int64_t out, bool bias) {
    const int64_t rank = files.tensor(name + ".lora.0.weight").shape[0];
    if (bias) weight(files, name + ".lora.2.bias", {out});  // required: load_linear would take it as optional
    return Rwkv7Lora{linear(name + ".lora.0", rank, C), linear(name + ".lora.2", out, rank)};
  };

  const std::string embed_name = "model.embeddings.weight";
  Embedding embed = load_embedding(files, embed_name, info.vocab_size, C);
  std::vector<Rwkv7Block> blocks;
  for (int64_t i = 0; i < info.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i), a = p + ".attn", f = p + ".ffn";
    const int64_t Dv = tc.value_dim();
    Rwkv7TimeMixWeights w;
    TensorView* mixes[6] = {&w.x_r, &w.x_w, &w.x_k, &w.x_v, &w.x_a, &w.x_g};
    const char* mix_names[6] = {".x_r", ".x_w", ".x_k", ".x_v", ".x_a", ".x_g"};
    for (int m = 0; m < 6; ++m) *mixes[m] = weight(files, a + mix_names[m], {1, 1, C});
    w.k_k = weight(files, a + ".k_k", {C});
    w.k_a = weight(files, a + ".k_a", {C});
    w.r_k = weight(files, a + ".r_k", {heads, head_dim});
    w.r_proj = linear(a + ".r_proj", C, C);
    w.k_proj = linear(a + ".k_proj", C, C);
    w.v_proj = linear(a + ".v_proj", Dv, C);
    w.o_proj = linear(a + ".o_proj", C, Dv);
    w.w_lora = lora(a + ".w_lora", C, true);
    w.a_lora = lora(a + ".a_lora", C, true);
    w.g_lora = lora(a + ".g_lora", Dv, false);
    if (i > 0) w.v_lora = lora(a + ".v_lora", Dv, true);
    // fla's GroupNorm is built with bias=True whatever norm_bias says.
    w.g_norm_weight = weight(files, a + ".g_norm.weight", {Dv});
    w.g_norm_bias = weight(files, a + ".g_norm.bias", {Dv});

    Rwkv7ChannelMixWeights fw;
    fw.x_k = weight(files, f + ".x_k", {C});
    fw.key = linear(f + ".key", inter, C);
    fw.value = linear(f + ".value", C, inter);

    Rwkv7Block block{
        norm_first && i == 0 ? std::optional<LayerNorm>(layer_norm(p + ".pre_norm")) : std::nullopt,
        layer_norm(p + ".attn_norm"),
        Rwkv7TimeMix(tc, std::move(w), a),
        layer_norm(p + ".ffn_norm"),
        Rwkv7ChannelMix(C, std::move(fw), f),
    };
    blocks.push_back(std::move(block));
  }
  LayerNorm norm = layer_norm("model.norm");
  Linear lm_head = load_output_head(files, embed, embed_name, info.tied_embeddings, options.weights, &owned);
  owned.record(info);
  return std::make_unique<Rwkv7Model>(std::move(files), std::move(info), std::move(embed), std::move(blocks),
                                      std::move(norm), std::move(lm_head));
}

ModelDescription describe_rwkv7(const Config& root, const LoadOptions& options) {
  const Rwkv7Shape s = read_shape(root, options);
  ModelDescription d;
  d.info = s.info;
  // Parameters are estimated only when the config names every LoRA rank (fla otherwise derives them).
  const char* ranks[4] = {"decay_low_rank_dim", "a_low_rank_dim", "gate_low_rank_dim", "v_low_rank_dim"};
  for (const char* r : ranks)
    if (!root.has(r)) return d;
  const int64_t C = s.tc.hidden, Dv = s.tc.value_dim(), I = d.info.intermediate_size, V = d.info.vocab_size;
  const int64_t rw = root.get_int(ranks[0]), ra = root.get_int(ranks[1]), rg = root.get_int(ranks[2]),
                rv = root.get_int(ranks[3]);
  const int64_t norm = C * (s.norm_bias ? 2 : 1);
  Checked n = Checked(V) * C * (d.info.tied_embeddings ? 1 : 2) + norm;
  for (int64_t i = 0; i < d.info.num_layers; ++i) {
    n += Checked(norm) * (s.norm_first && i == 0 ? 3 : 2);
    n += Checked(9) * C;  // x_r .. x_g, k_k, k_a, r_k
    n += 2 * linear_params(C, C) + 2 * linear_params(Dv, C);  // r, k, v, o
    n += linear_params(rw, C) + linear_params(C, rw, true) + linear_params(ra, C) + linear_params(C, ra, true);
    n += linear_params(rg, C) + linear_params(Dv, rg);
    if (i > 0) n += linear_params(rv, C) + linear_params(Dv, rv, true);
    n += Checked(2) * Dv;                              // g_norm
    n += C + linear_params(I, C) + linear_params(C, I);  // channel mix
  }
  d.info.parameter_count = n.value();
  d.parameters_estimated = true;
  return d;
}

}  // namespace attnzoo
