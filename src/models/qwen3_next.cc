// Qwen3NextForCausalLM and Qwen3_5ForCausalLM (text): hybrid stacks of Gated DeltaNet layers ("linear_attention")
// and gated full-attention layers ("full_attention"), chosen by layer_types or every full_attention_interval-th
// layer. Full attention: q_proj yields [q ; gate] per head, the output is multiplied by sigmoid(gate); q/k RMSNorm;
// partial RoPE. Every RMSNorm except the DeltaNet's gated one is zero-centred ((1 + w)). Feed-forward: a sparse
// MoE (softmax top-k, shared expert gated by sigmoid(shared_expert_gate(x))) on layers where num_experts > 0,
// (i + 1) % decoder_sparse_step == 0 and i is not in mlp_only_layers; a dense gated MLP elsewhere.
// The two differ in the DeltaNet input projection: Qwen3-Next fuses in_proj_qkvz / in_proj_ba grouped per key
// head, Qwen3.5 stores in_proj_qkv / in_proj_z / in_proj_b / in_proj_a separately (a Qwen3-Next GGUF comes as
// in_proj_qkv / in_proj_z, its attn_qkv and attn_gate, beside in_proj_ba); all are regrouped at load
// per token into the mixer's [q k v z b a] order (the weights stay borrowed from the checkpoint).
#include <algorithm>

#include "layers/activations.h"
#include "layers/gated_deltanet_mixer.h"
#include "layers/moe.h"
#include "loader/load_error.h"
#include "models/decoder.h"
#include "models/describe.h"
#include "models/hf_config.h"
#include "models/llama_layout.h"
#include "models/registry.h"

namespace attnzoo {
namespace {

bool is_full_attention(const Config& c, int64_t i, int64_t num_layers) {
  if (c.has("layer_types")) {
    const auto types = c.get_string_list("layer_types");
    if (int64_t(types.size()) != num_layers)
      throw LoadError(c.source() + ": key 'layer_types': expected " + std::to_string(num_layers) + " entries");
    const std::string& t = types[size_t(i)];
    if (t != "full_attention" && t != "linear_attention")
      throw LoadError(c.source() + ": key 'layer_types': unknown layer type '" + t + "'");
    return t == "full_attention";
  }
  const int64_t interval = c.get_int_or("full_attention_interval", 4);
  if (interval <= 0) throw LoadError(c.source() + ": key 'full_attention_interval' must be positive");
  return (i + 1) % interval == 0;
}

// Everything the builder reads from config.json (`c`: the text config), shared with describe_qwen3_next.
struct Qwen3NextShape {
  ModelInfo info;
  float eps = 1e-6f;
  Activation act = Activation::silu;
  RopeConfig rope;
  GatedDeltaNetConfig dc;
  int64_t num_experts = 0, sparse_step = 1;
  std::vector<int64_t> mlp_only;
  MoeConfig mc;
  AttentionConfig attention;  // the full_attention layers

  bool sparse(int64_t i) const {
    return num_experts > 0 && (i + 1) % sparse_step == 0 && std::find(mlp_only.begin(), mlp_only.end(), i) == mlp_only.end();
  }
};

Qwen3NextShape read_shape(const Config& root, const Config& c, const LoadOptions& options) {
  Qwen3NextShape s;
  ModelInfo& info = s.info = read_model_info(root, c, options, "", /*with_intermediate=*/false);
  info.intermediate_size = c.get_int_or("intermediate_size", 0);  // optional here, unlike with_intermediate
  const float eps = s.eps = float(c.get_float_or("rms_norm_eps", 1e-6));
  s.act = parse_activation(c.get_string_or("hidden_act", "silu"));
  const int64_t H = info.hidden_size, D = info.head_dim;
  if (H <= 0 || info.num_layers <= 0 || info.num_heads <= 0 || info.num_kv_heads <= 0 || D <= 0 || info.vocab_size <= 0)
    throw LoadError(c.source() + ": sizes (hidden_size, num_*, head_dim, vocab_size) must be positive");
  s.rope = read_rope(c, D, rotary_share("qwen3_next"));

  GatedDeltaNetConfig& dc = s.dc;
  dc.hidden = H;
  dc.num_k_heads = c.get_int("linear_num_key_heads");
  dc.num_v_heads = c.get_int("linear_num_value_heads");
  dc.head_k_dim = c.get_int("linear_key_head_dim");
  dc.head_v_dim = c.get_int("linear_value_head_dim");
  dc.conv_kernel = c.get_int_or("linear_conv_kernel_dim", 4);
  dc.norm_eps = eps;
  if (dc.num_k_heads <= 0 || dc.num_v_heads <= 0 || dc.head_k_dim <= 0 || dc.head_v_dim <= 0 ||
      dc.num_v_heads % dc.num_k_heads != 0)
    throw LoadError(c.source() + ": linear_num_value_heads must be a positive multiple of linear_num_key_heads, "
                    "and the linear head dims positive");
  if (dc.conv_kernel < 1 || dc.conv_kernel > 16)
    throw LoadError(c.source() + ": key 'linear_conv_kernel_dim' must be in [1, 16]");

  s.num_experts = c.get_int_or("num_experts", 0);
  s.sparse_step = std::max<int64_t>(1, c.get_int_or("decoder_sparse_step", 1));
  s.mlp_only = c.has("mlp_only_layers") ? c.get_int_list("mlp_only_layers") : std::vector<int64_t>{};
  MoeConfig& mc = s.mc;
  mc.top_k = c.get_int_or("num_experts_per_tok", 1);
  mc.normalize_top_k = c.get_bool_or("norm_topk_prob", true);

  s.attention = model_attention_config(info, /*window=*/0, options);
  s.attention.output_gate = true;
  return s;
}

}  // namespace

std::unique_ptr<Model> build_qwen3_next(ModelFiles files, const LoadOptions& options) {
  const Config c = files.config().text_config();
  const Qwen3NextShape shape = read_shape(files.config(), c, options);
  ModelInfo info = shape.info;
  const float eps = shape.eps;
  const Activation act = shape.act;
  const int64_t H = info.hidden_size, D = info.head_dim;
  const Rope rope(shape.rope);
  const GatedDeltaNetConfig& dc = shape.dc;
  const int64_t num_experts = shape.num_experts;
  const MoeConfig& mc = shape.mc;

  count_checkpoint(files, info);

  WeightBytes owned;
  auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    return load_linear(files, name, out, in, options.weights, &owned);
  };
  auto norm = [&](const std::string& name, int64_t dim) {
    return RmsNorm(weight(files, name + ".weight", {dim}), eps, /*add_one=*/true, name);
  };
  auto gated_mlp = [&](const std::string& m, int64_t inter) {
    return GatedMlp(linear(m + ".gate_proj", inter, H), linear(m + ".up_proj", inter, H),
                    linear(m + ".down_proj", H, inter), act, m);
  };

  auto deltanet = [&](const std::string& a) {
    GatedDeltaNetWeights w;
    if (files.has(a + ".in_proj_qkvz.weight")) {
      w.in_proj.push_back(linear(a + ".in_proj_qkvz", dc.conv_dim() + dc.value_dim(), H));
      w.in_proj.push_back(linear(a + ".in_proj_ba", 2 * dc.num_v_heads, H));
      w.in_proj_runs = qwen3_next_in_proj_runs(dc);
    } else if (files.has(a + ".in_proj_ba.weight")) {  // Qwen3-Next GGUF: attn_qkv and attn_gate as stored
      w.in_proj.push_back(linear(a + ".in_proj_qkv", dc.conv_dim(), H));
      w.in_proj.push_back(linear(a + ".in_proj_z", dc.value_dim(), H));
      w.in_proj.push_back(linear(a + ".in_proj_ba", 2 * dc.num_v_heads, H));
      w.in_proj_runs = qwen3_next_split_in_proj_runs(dc);
    } else {
      w.in_proj.push_back(linear(a + ".in_proj_qkv", dc.conv_dim(), H));
      w.in_proj.push_back(linear(a + ".in_proj_z", dc.value_dim(), H));
      w.in_proj.push_back(linear(a + ".in_proj_b", dc.num_v_heads, H));
      w.in_proj.push_back(linear(a + ".in_proj_a", dc.num_v_heads, H));
      w.in_proj_runs = qwen3_5_in_proj_runs(dc);
    }
    w.out_proj = linear(a + ".out_proj", H, dc.value_dim());
    w.conv_weight = weight(files, a + ".conv1d.weight", {dc.conv_dim(), 1, dc.conv_kernel});
    w.conv_bias = optional_weight(files, a + ".conv1d.bias", {dc.conv_dim()});
    w.A_log = weight(files, a + ".A_log", {dc.num_v_heads});
    w.dt_bias = weight(files, a + ".dt_bias", {dc.num_v_heads});
    w.norm_weight = weight(files, a + ".norm.weight", {dc.head_v_dim});
    return std::make_unique<GatedDeltaNetMixer>(dc, std::move(w), a);
  };

  auto attention = [&](const std::string& a) {
    const AttentionConfig& ac = shape.attention;
    const int64_t qw = info.num_heads * D, kw = info.num_kv_heads * D;
    std::optional<RmsNorm> qn, kn;
    qn.emplace(norm(a + ".q_norm", D));
    kn.emplace(norm(a + ".k_norm", D));
    return std::make_unique<AttentionLayer>(ac, linear(a + ".q_proj", 2 * qw, H), linear(a + ".k_proj", kw, H),
                                            linear(a + ".v_proj", kw, H), linear(a + ".o_proj", H, qw), std::move(qn),
                                            std::move(kn), rope, a);
  };

  auto feed_forward = [&](const std::string& m, int64_t i) -> std::unique_ptr<FeedForward> {
    const bool sparse = shape.sparse(i);
    if (!sparse) return std::make_unique<GatedMlp>(gated_mlp(m, c.get_int("intermediate_size")));
    const int64_t I = c.get_int("moe_intermediate_size");
    std::vector<GatedMlp> experts;
    for (int64_t e = 0; e < num_experts; ++e) experts.push_back(gated_mlp(m + ".experts." + std::to_string(e), I));
    std::optional<GatedMlp> shared;
    std::optional<Linear> shared_gate;
    if (files.has(m + ".shared_expert.gate_proj.weight")) {
      shared.emplace(gated_mlp(m + ".shared_expert", c.get_int("shared_expert_intermediate_size")));
      if (files.has(m + ".shared_expert_gate.weight")) shared_gate.emplace(linear(m + ".shared_expert_gate", 1, H));
    }
    return std::make_unique<SparseMoe>(mc, linear(m + ".gate", num_experts, H), std::move(experts),
                                       std::move(shared), std::move(shared_gate), m);
  };

  LlamaLayoutParts parts;
  parts.norm_eps = eps;
  parts.norm_add_one = true;
  parts.mixer = [&](int64_t i, const std::string& p) -> std::unique_ptr<SequenceMixer> {
    if (is_full_attention(c, i, info.num_layers)) return attention(p + ".self_attn");
    return deltanet(p + ".linear_attn");
  };
  parts.ffn = [&](int64_t i, const std::string& p) { return feed_forward(p + ".mlp", i); };
  return assemble_llama_layout(std::move(files), c, std::move(info), parts, options.weights, owned);
}

ModelDescription describe_qwen3_next(const Config& root, const LoadOptions& options) {
  const Config c = root.text_config();
  const Qwen3NextShape s = read_shape(root, c, options);
  ModelDescription d;
  d.info = s.info;
  d.attention = s.attention;
  const GatedDeltaNetConfig& dc = s.dc;
  const int64_t H = s.info.hidden_size, V = s.info.vocab_size, D = s.info.head_dim;
  const int64_t qw = s.info.num_heads * D, kw = s.info.num_kv_heads * D;
  // A multimodal wrapper's own tie_word_embeddings decides its head (the text config's may say otherwise).
  d.info.tied_embeddings = config_ties_embeddings(root, c, false);
  Checked params = Checked(V) * H * (d.info.tied_embeddings ? 1 : 2) + H;
  for (int64_t i = 0; i < d.info.num_layers; ++i) {
    params += Checked(2) * H;
    if (is_full_attention(c, i, d.info.num_layers)) {
      d.info.layers.push_back({AttentionLayer::kind_of(s.attention), 0, AttentionLayer::spec(s.attention)});
      params += linear_params(2 * qw, H) + 2 * linear_params(kw, H) + linear_params(H, qw) + Checked(2) * D;
    } else {
      d.info.layers.push_back({GatedDeltaNetMixer::kKind, 0, GatedDeltaNetMixer::spec(dc)});
      // in_proj (q k v z b a, fused or split: the same total), conv (no bias), A_log, dt_bias, norm, out_proj.
      params += linear_params(dc.proj_dim(), H) + Checked(dc.conv_dim()) * dc.conv_kernel + 2 * dc.num_v_heads + dc.head_v_dim +
                linear_params(H, dc.value_dim());
    }
    if (!s.sparse(i)) {
      params += 3 * linear_params(c.get_int("intermediate_size"), H);
    } else {
      const int64_t shared = c.get_int_or("shared_expert_intermediate_size", 0);
      params += Checked(s.num_experts) * 3 * linear_params(c.get_int("moe_intermediate_size"), H) +
                linear_params(s.num_experts, H) + (shared > 0 ? 3 * linear_params(shared, H) + H : 0);
    }
  }
  d.info.parameter_count = params.value();
  d.parameters_estimated = true;
  return d;
}

}  // namespace attnzoo
