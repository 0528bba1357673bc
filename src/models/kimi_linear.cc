// KimiLinearForCausalLM: a hybrid of Kimi Delta Attention layers ("linear_attention", layers/kda_mixer.h) and
// multi-head latent attention layers ("full_attention") WITHOUT positional encoding: transformers' KimiLinearAttention
// keeps DeepSeek's MLA layout (the shared k_pe part of the latent included) but never rotates it. Layer kinds come
// from layer_types, else from linear_attn_config's 1-indexed kda_layers / full_attn_layers. Feed-forward: a dense
// gated MLP on "dense" mlp_layer_types (else the first first_k_dense_replace layers), DeepSeek's sigmoid
// grouped-top-k MoE with shared experts elsewhere. Checkpoint key names are the original Moonshot ones
// (num_experts, num_experts_per_token, num_expert_group, moe_renormalize, num_shared_experts,
// block_sparse_moe.experts.<e>.w1/w2/w3); transformers' aliases are accepted too.
#include <algorithm>

#include "layers/activations.h"
#include "layers/kda_mixer.h"
#include "loader/load_error.h"
#include "models/decoder.h"
#include "models/deepseek_moe_from_checkpoint.h"
#include "models/describe.h"
#include "models/kimi_linear_layout.h"
#include "models/llama_layout.h"
#include "models/mla_from_checkpoint.h"
#include "models/registry.h"

namespace attnzoo {
namespace {

std::vector<std::string> layer_kinds(const Config& c, int64_t n) {
  std::vector<std::string> types;
  if (c.has("layer_types")) {
    types = c.get_string_list("layer_types");
  } else if (c.has("linear_attn_config")) {
    const Config la = c.sub("linear_attn_config");
    types.assign(size_t(n), "");
    auto mark = [&](const char* key, const char* kind) {
      for (int64_t l : la.get_int_list(key)) {
        if (l < 1 || l > n)
          throw LoadError(c.source() + ": key 'linear_attn_config." + key + "': layer " + std::to_string(l) +
                          " outside 1.." + std::to_string(n));
        types[size_t(l - 1)] = kind;
      }
    };
    mark("full_attn_layers", "full_attention");
    mark("kda_layers", "linear_attention");
  } else {
    for (int64_t i = 0; i < n; ++i) types.push_back(i && i % 4 == 0 ? "full_attention" : "linear_attention");
  }
  if (int64_t(types.size()) != n)
    throw LoadError(c.source() + ": key 'layer_types': expected " + std::to_string(n) + " entries");
  for (const auto& t : types)
    if (t != "full_attention" && t != "linear_attention")
      throw LoadError(c.source() + ": key 'layer_types': unknown or missing layer type '" + t + "'");
  return types;
}

std::vector<bool> sparse_layers(const Config& c, int64_t n) {
  std::vector<bool> sparse;
  if (c.has("mlp_layer_types")) {
    const auto types = c.get_string_list("mlp_layer_types");
    if (int64_t(types.size()) != n)
      throw LoadError(c.source() + ": key 'mlp_layer_types': expected " + std::to_string(n) + " entries");
    for (const auto& t : types) {
      if (t != "dense" && t != "sparse") throw LoadError(c.source() + ": key 'mlp_layer_types': unknown type '" + t + "'");
      sparse.push_back(t == "sparse");
    }
  } else {
    const int64_t first_dense = c.get_int_or("first_k_dense_replace", 1);
    for (int64_t i = 0; i < n; ++i) sparse.push_back(i >= first_dense);
  }
  return sparse;
}

// Everything the builder reads from config.json, shared with describe_kimi_linear.
struct KimiShape {
  ModelInfo info;
  float eps = 1e-5f;
  Activation act = Activation::silu;
  MlaConfig mc;
  KdaConfig kc;
  KimiLinearLayout layout;
  DeepseekMoeShape moe;
};

KimiShape read_shape(const Config& c, const LoadOptions& options) {
  KimiShape s;
  ModelInfo& info = s.info = read_mla_model_info(c, options, c.get_int_or("model_max_length", 0));
  const float eps = s.eps = float(c.get_float_or("rms_norm_eps", 1e-5));
  const std::string act_name = c.get_string_or("hidden_act", "silu");
  s.act = parse_activation(act_name);
  const int64_t H = info.hidden_size;
  if (act_name != "silu") throw LoadError(c.source() + ": key 'hidden_act': the KDA short conv supports only silu");

  // No RoPE, hence no YaRN mscale either: the plain (dn + dr)^-0.5 softmax scale.
  s.mc = read_mla_config(c, info, options);
  s.mc.rope = false;  // Kimi Linear's MLA layers carry no positional encoding (NoPE)
  const MlaConfig& mc = s.mc;

  KdaConfig& kc = s.kc;
  kc.hidden = H;
  kc.norm_eps = eps;
  s.layout = read_kimi_linear_layout(c);
  kc.num_heads = s.layout.kda_heads;
  kc.head_dim = s.layout.kda_head_dim;
  kc.conv_kernel = s.layout.conv_kernel;
  if (H <= 0 || info.num_layers <= 0 || info.num_heads <= 0 || info.vocab_size <= 0 || mc.kv_lora_rank <= 0 ||
      mc.qk_nope_head_dim <= 0 || mc.qk_rope_head_dim <= 0 || mc.v_head_dim <= 0 || mc.q_lora_rank < 0 ||
      kc.num_heads <= 0 || kc.head_dim <= 0)
    throw LoadError(c.source() + ": sizes (hidden_size, num_*, kv_lora_rank, q_lora_rank, qk_*_head_dim, "
                    "v_head_dim, vocab_size, linear head count / dim) must be positive");
  if (kc.conv_kernel < 1 || kc.conv_kernel > 16)
    throw LoadError(c.source() + ": key 'short_conv_kernel_size' must be in [1, 16]");
  s.moe.num_experts = s.layout.num_experts;
  DeepseekMoeConfig& moe = s.moe.config;
  moe.top_k = kimi_int(c, "num_experts_per_token", "num_experts_per_tok", 1);
  moe.n_group = kimi_int(c, "num_expert_group", "n_group", 1);
  moe.topk_group = c.get_int_or("topk_group", 1);
  moe.norm_topk_prob = c.has("moe_renormalize") ? c.get_bool("moe_renormalize") : c.get_bool_or("norm_topk_prob", true);
  moe.routed_scaling_factor = float(c.get_float_or("routed_scaling_factor", 1.0));
  s.moe.n_shared = kimi_int(c, "num_shared_experts", "n_shared_experts", 0);

  return s;
}

}  // namespace

int64_t kimi_int(const Config& c, const char* key, const char* alias, int64_t fallback) {
  return c.has(key) ? c.get_int(key) : c.get_int_or(alias, fallback);
}

KimiLinearLayout read_kimi_linear_layout(const Config& c) {
  KimiLinearLayout l;
  const int64_t n = c.get_int("num_hidden_layers");
  if (n <= 0) throw LoadError(c.source() + ": key 'num_hidden_layers' must be positive");
  l.kda_heads = c.get_int_or("linear_num_heads", 32);
  l.kda_head_dim = c.get_int_or("linear_head_dim", 128);
  l.conv_kernel = c.get_int_or("linear_conv_kernel_dim", 4);
  if (c.has("linear_attn_config")) {
    const Config la = c.sub("linear_attn_config");
    l.kda_heads = la.get_int_or("num_heads", l.kda_heads);
    l.kda_head_dim = la.get_int_or("head_dim", l.kda_head_dim);
    l.conv_kernel = la.get_int_or("short_conv_kernel_size", l.conv_kernel);
  }
  for (const std::string& t : layer_kinds(c, n)) l.full_attention.push_back(t == "full_attention");
  l.num_experts = kimi_int(c, "num_experts", "num_local_experts", 0);
  l.sparse = sparse_layers(c, n);
  if (l.num_experts <= 0) l.sparse.assign(size_t(n), false);
  return l;
}

std::unique_ptr<Model> build_kimi_linear(ModelFiles files, const LoadOptions& options) {
  const Config& c = files.config();
  KimiShape shape = read_shape(c, options);
  ModelInfo info = shape.info;
  const int64_t H = info.hidden_size;
  const KdaConfig& kc = shape.kc;
  RopeConfig rc;  // required by the mixer's constructor, never applied (MlaConfig::rope is false)
  rc.head_dim = shape.mc.qk_rope_head_dim;
  const Rope unused_rope(rc);

  count_checkpoint(files, info);

  WeightBytes owned;
  auto proj = [&](const std::string& name, int64_t out, int64_t in) {
    return load_linear(files, name, out, in, options.weights, &owned);
  };

  auto mla = [&](const std::string& a) -> std::unique_ptr<SequenceMixer> {
    return load_mla_mixer(files, shape.mc, unused_rope, a, options.weights, &owned);
  };

  auto kda = [&](const std::string& a) -> std::unique_ptr<SequenceMixer> {
    const int64_t D = kc.qkv_dim(), K = kc.head_dim;
    KdaWeights w;
    w.q_proj = proj(a + ".q_proj", D, H);
    w.k_proj = proj(a + ".k_proj", D, H);
    w.v_proj = proj(a + ".v_proj", D, H);
    w.q_conv = weight(files, a + ".q_conv1d.weight", {D, 1, kc.conv_kernel});
    w.k_conv = weight(files, a + ".k_conv1d.weight", {D, 1, kc.conv_kernel});
    w.v_conv = weight(files, a + ".v_conv1d.weight", {D, 1, kc.conv_kernel});
    w.f_a_proj = proj(a + ".f_a_proj", K, H);
    w.f_b_proj = proj(a + ".f_b_proj", D, K);
    w.A_log = weight(files, a + ".A_log", {1, 1, kc.num_heads, 1});
    w.dt_bias = weight(files, a + ".dt_bias", {D});
    w.b_proj = proj(a + ".b_proj", kc.num_heads, H);
    w.g_a_proj = proj(a + ".g_a_proj", K, H);
    w.g_b_proj = proj(a + ".g_b_proj", D, K);
    w.o_norm_weight = weight(files, a + ".o_norm.weight", {K});
    w.o_proj = proj(a + ".o_proj", H, D);
    return std::make_unique<KdaMixer>(kc, std::move(w), a);
  };

  LlamaLayoutParts parts;
  parts.norm_eps = shape.eps;
  parts.may_tie = false;  // transformers' KimiLinearForCausalLM has no tied weights, whatever config.json says
  parts.mixer = [&](int64_t i, const std::string& p) {
    return shape.layout.full_attention[size_t(i)] ? mla(p + ".self_attn") : kda(p + ".self_attn");
  };
  parts.ffn = [&](int64_t i, const std::string& p) -> std::unique_ptr<FeedForward> {
    if (!shape.layout.sparse[size_t(i)]) {
      // The original checkpoints call the dense layers' MLP block_sparse_moe too; transformers' own names: mlp.
      const std::string m = files.has(p + ".mlp.gate_proj.weight") ? p + ".mlp" : p + ".block_sparse_moe";
      return std::make_unique<GatedMlp>(load_gated_mlp(files, m, kGatedMlpProjNames, c.get_int("intermediate_size"),
                                                       H, shape.act, options.weights, &owned));
    }
    // Moonshot's expert names: w1 gate, w3 up, w2 down.
    return load_deepseek_moe(files, shape.moe, p + ".block_sparse_moe", {".w1", ".w3", ".w2"},
                             c.get_int("moe_intermediate_size"), H, shape.act, options.weights, &owned);
  };
  return assemble_llama_layout(std::move(files), c, std::move(info), parts, options.weights, owned);
}

ModelDescription describe_kimi_linear(const Config& root, const LoadOptions& options) {
  const KimiShape s = read_shape(root, options);
  ModelDescription d;
  d.info = s.info;
  d.mla = s.mc;
  const MlaConfig& mc = s.mc;
  const KdaConfig& kc = s.kc;
  const int64_t H = s.info.hidden_size, V = s.info.vocab_size, D = kc.qkv_dim(), K = kc.head_dim;
  d.info.tied_embeddings = false;  // never tied (see the builder)
  Checked params = Checked(V) * H * 2 + H;
  for (int64_t i = 0; i < d.info.num_layers; ++i) {
    params += Checked(2) * H;
    if (s.layout.full_attention[size_t(i)]) {
      d.info.layers.push_back({MlaMixer::kKind, 0, MlaMixer::spec(mc)});
      params += mla_parameter_count(mc, /*attention_bias=*/false);
    } else {
      d.info.layers.push_back({KdaMixer::kKind, 0, KdaMixer::spec(kc)});
      params += 3 * linear_params(D, H) + Checked(3) * D * kc.conv_kernel + 2 * (linear_params(K, H) + linear_params(D, K)) +
                kc.num_heads + D + linear_params(kc.num_heads, H) + K + linear_params(H, D);
    }
    params += deepseek_ffn_parameter_count(root, s.moe, s.layout.sparse[size_t(i)], H);
  }
  d.info.parameter_count = params.value();
  d.parameters_estimated = true;
  return d;
}

}  // namespace attnzoo
