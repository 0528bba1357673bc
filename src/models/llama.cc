// LlamaForCausalLM and its close relatives, which differ only in switches read from config.json / the tensors:
//   Qwen2   q/k/v biases (found by tensor presence; Llama's attention_bias adds o_proj's too)
//   Qwen3   per-head RMSNorm on q and k before RoPE (q_norm / k_norm), explicit head_dim
//   Mistral sliding_window on every layer; Qwen2/3 may window some layers via layer_types
//   Qwen3-MoE Qwen3's attention; feed-forwards are sparse MoEs (softmax top-k router, no shared expert) on the
//           layers decoder_sparse_step and mlp_only_layers select, dense MLPs elsewhere
//   Mixtral every feed-forward a sparse MoE (softmax, top-k renormalized) of intermediate_size-wide experts, stored
//           as block_sparse_moe.{gate, experts.<e>.w1 (gate) / w3 (up) / w2 (down)}; a GGUF of it reads as mlp.*
//           under Qwen3-MoE's names
//   SmolLM3 NoPE layers: no_rope_layers[i] == 0 (default: every no_rope_layer_interval-th layer, 4) skip RoPE
//   Ministral 3 (ministral3: Ministral3ForCausalLM, the text model of Mistral 3 wrappers) Mistral's attention with
//           Llama 4's query temperature (rope_parameters' llama_4_scaling_beta over original_max_position_embeddings),
//           usually beside YaRN
#include <algorithm>
#include <cmath>

#include "layers/activations.h"
#include "layers/moe.h"
#include "loader/load_error.h"
#include "models/decoder.h"
#include "models/describe.h"
#include "models/hf_config.h"
#include "models/llama_layout.h"
#include "models/registry.h"

namespace attnzoo {
namespace {


// SmolLM3: whether layer i rotates q and k (no_rope_layers, 1 = RoPE, else a NoPE layer every
// no_rope_layer_interval-th layer, as transformers' SmolLM3Config fills it in); every layer of the other families.
bool uses_rope(const Config& c, int64_t i, int64_t num_layers) {
  if (c.get_string_or("model_type", "") != "smollm3") return true;
  if (c.has("no_rope_layers")) {
    const auto flags = c.get_int_list("no_rope_layers");
    if (int64_t(flags.size()) != num_layers)
      throw LoadError(c.source() + ": key 'no_rope_layers': expected " + std::to_string(num_layers) + " entries");
    return flags[size_t(i)] != 0;
  }
  const int64_t interval = c.get_int_or("no_rope_layer_interval", 4);
  if (interval <= 0) throw LoadError(c.source() + ": key 'no_rope_layer_interval': must be positive");
  return (i + 1) % interval != 0;
}

AttentionConfig attention_config(const ModelInfo& info, const Config& c, int64_t i, const LoadOptions& options) {
  AttentionConfig ac = model_attention_config(info, layer_window(c, i, info.num_layers), options);
  // Ministral 3 reads both from the rope dict, as transformers' Ministral3Attention does.
  if (c.get_string_or("model_type", "") != "ministral3") return ac;
  const Config p = c.has("rope_parameters") ? c.sub("rope_parameters")
                   : c.has("rope_scaling")  ? c.sub("rope_scaling")
                                            : c;
  ac.temperature_beta = float(p.get_float_or("llama_4_scaling_beta", 0.0));
  ac.temperature_interval = p.get_int_or("original_max_position_embeddings", 0);
  if (!std::isfinite(ac.temperature_beta) || (ac.temperature_beta != 0.f && ac.temperature_interval <= 0))
    throw LoadError(c.source() + ": key 'rope_parameters.llama_4_scaling_beta': needs a finite value and a positive "
                    "rope_parameters.original_max_position_embeddings");
  return ac;
}

// Qwen3-MoE's feed-forward layout (transformers' Qwen3MoeDecoderLayer): which layers are sparse MoEs.
struct MoeLayout {
  int64_t num_experts = 0, sparse_step = 1, expert_inter = 0;
  bool normalize = false;
  std::vector<int64_t> dense_layers;  // mlp_only_layers
  explicit MoeLayout(const Config& c)
      // transformers 5 saves num_experts as num_local_experts
      : num_experts(c.get_int_or("num_experts", c.get_int_or("num_local_experts", 0))),
        sparse_step(c.get_int_or("decoder_sparse_step", 1)),
        dense_layers(c.has("mlp_only_layers") ? c.get_int_list("mlp_only_layers") : std::vector<int64_t>{}) {
    if (num_experts > 0 && sparse_step <= 0) throw LoadError(c.source() + ": decoder_sparse_step must be positive");
    if (num_experts == 0) return;
    // Mixtral: experts as wide as the dense MLP would be, weights always renormalized over the top k
    const bool mixtral = c.get_string_or("model_type", "") == "mixtral";
    expert_inter = mixtral ? c.get_int("intermediate_size") : c.get_int("moe_intermediate_size");
    normalize = mixtral || c.get_bool_or("norm_topk_prob", false);
  }
  bool sparse(int64_t layer) const {
    return num_experts > 0 && (layer + 1) % sparse_step == 0 &&
           std::find(dense_layers.begin(), dense_layers.end(), layer) == dense_layers.end();
  }
};

}  // namespace

std::unique_ptr<Model> build_llama_family(ModelFiles files, const LoadOptions& options) {
  const Config c = files.config().text_config();
  ModelInfo info = read_dense_model_info(files.config(), c, options, "");
  const float eps = float(c.get_float_or("rms_norm_eps", 1e-6));
  const Activation act = parse_activation(c.get_string_or("hidden_act", "silu"));
  const int64_t H = info.hidden_size, I = info.intermediate_size, D = info.head_dim;
  const int64_t qw = info.num_heads * D, kw = info.num_kv_heads * D;
  const Rope rope(read_rope(c, D, rotary_share(info.model_type)));
  RopeConfig none;
  none.type = "none";
  none.head_dim = D;
  const Rope nope(none);

  count_checkpoint(files, info);

  WeightBytes owned;
  auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    return load_linear(files, name, out, in, options.weights, &owned);
  };

  LlamaLayoutParts parts;
  parts.norm_eps = eps;
  parts.mixer = [&](int64_t i, const std::string& p) -> std::unique_ptr<SequenceMixer> {
    const std::string a = p + ".self_attn";
    const AttentionConfig ac = attention_config(info, c, i, options);
    std::optional<RmsNorm> qn, kn;
    if (files.has(a + ".q_norm.weight")) qn.emplace(weight(files, a + ".q_norm.weight", {D}), eps, false, a + ".q_norm");
    if (files.has(a + ".k_norm.weight")) kn.emplace(weight(files, a + ".k_norm.weight", {D}), eps, false, a + ".k_norm");
    return std::make_unique<AttentionLayer>(ac, linear(a + ".q_proj", qw, H), linear(a + ".k_proj", kw, H),
                                            linear(a + ".v_proj", kw, H), linear(a + ".o_proj", H, qw), std::move(qn),
                                            std::move(kn), uses_rope(c, i, info.num_layers) ? rope : nope, a);
  };
  auto gated_mlp = [&](const std::string& m, int64_t inter) {
    return GatedMlp(linear(m + ".gate_proj", inter, H), linear(m + ".up_proj", inter, H),
                    linear(m + ".down_proj", H, inter), act, m);
  };
  const MoeLayout moe(c);
  parts.ffn = [&](int64_t i, const std::string& p) -> std::unique_ptr<FeedForward> {
    const bool mixtral_names = files.has(p + ".block_sparse_moe.gate.weight");
    const std::string m = p + (mixtral_names ? ".block_sparse_moe" : ".mlp");
    if (!moe.sparse(i)) return std::make_unique<GatedMlp>(gated_mlp(m, I));
    MoeConfig mc;
    mc.top_k = c.get_int("num_experts_per_tok");
    mc.normalize_top_k = moe.normalize;
    std::vector<GatedMlp> experts;
    for (int64_t e = 0; e < moe.num_experts; ++e) {
      const std::string x = m + ".experts." + std::to_string(e);
      const int64_t w = moe.expert_inter;
      experts.push_back(mixtral_names ? GatedMlp(linear(x + ".w1", w, H), linear(x + ".w3", w, H),
                                                 linear(x + ".w2", H, w), act, x)
                                      : gated_mlp(x, w));
    }
    return std::make_unique<SparseMoe>(mc, linear(m + ".gate", moe.num_experts, H), std::move(experts), std::nullopt,
                                       std::nullopt, m);
  };
  return assemble_llama_layout(std::move(files), c, std::move(info), parts, options.weights, owned);
}

ModelDescription describe_llama_family(const Config& root, const LoadOptions& options) {
  const Config c = root.text_config();
  ModelDescription d;
  d.info = read_dense_model_info(root, c, options, "");
  const int64_t H = d.info.hidden_size, I = d.info.intermediate_size, V = d.info.vocab_size;
  const int64_t qw = d.info.num_heads * d.info.head_dim, kw = d.info.num_kv_heads * d.info.head_dim;
  (void)read_rope(c, d.info.head_dim, rotary_share(d.info.model_type));  // the builder rejects unsupported rope types; so does the description
  d.attention = attention_config(d.info, c, 0, options);
  d.info.tied_embeddings = config_ties_embeddings(root, c, false);
  // Biases and q/k norms as transformers' classes create them: Qwen2 q/k/v biases, Qwen3 q/k norms,
  // attention_bias (Llama, Qwen3: all four projections), mlp_bias (Llama).
  const std::string type = d.info.model_type;
  const bool qkv_bias = type == "qwen2" || c.get_bool_or("attention_bias", false);
  const bool o_bias = type != "qwen2" && c.get_bool_or("attention_bias", false);
  const bool mlp_bias = c.get_bool_or("mlp_bias", false);
  Checked params = Checked(V) * H * (d.info.tied_embeddings ? 1 : 2) + H;
  const MoeLayout moe(c);
  const int64_t expert_inter = moe.expert_inter;
  for (int64_t i = 0; i < d.info.num_layers; ++i) {
    const AttentionConfig ac = attention_config(d.info, c, i, options);
    (void)uses_rope(c, i, d.info.num_layers);  // a bad no_rope_layers fails here as in the builder
    d.info.layers.push_back({AttentionLayer::kind_of(ac), ac.window, AttentionLayer::spec(ac)});
    params += Checked(2) * H + linear_params(qw, H, qkv_bias) + 2 * linear_params(kw, H, qkv_bias) + linear_params(H, qw, o_bias) +
              (type == "qwen3" || type == "qwen3_moe" ? Checked(2) * d.info.head_dim : Checked(0));
    // router row + gate / up / down per expert, or the dense MLP
    params += moe.sparse(i) ? Checked(moe.num_experts) * (Checked(H) + Checked(3) * H * expert_inter)
                            : 2 * linear_params(I, H, mlp_bias) + linear_params(H, I, mlp_bias);
  }
  d.info.parameter_count = params.value();
  d.parameters_estimated = true;
  return d;
}

}  // namespace attnzoo
