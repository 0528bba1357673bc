#include "loader/gguf_hybrids.h"

#include <algorithm>
#include <cstring>

#include "loader/gguf_hf_util.h"
#include "loader/gguf_kimi_linear.h"
#include "loader/gguf_pattern_hybrids.h"
#include "loader/gguf_qwen35.h"
#include "loader/gguf_rwkv7.h"
#include "loader/load_error.h"

namespace attnzoo {
namespace {

using gguf_hf::add_class;
using gguf_hf::attention_layers;
using gguf_hf::AttentionLayers;
using gguf_hf::any_block_has;
using gguf_hf::fail;
using gguf_hf::JsonObject;
using gguf_hf::Meta;
using gguf_hf::sized;

enum class Family {
  mamba, mamba2, falcon_h1, lfm2, lfm2moe, jamba, qwen3next, qwen35, qwen35moe, rwkv7, nemotron_h, nemotron_h_moe, granitehybrid,
  kimi_linear
};

// Qwen3-Next and Qwen3.5: zero-centred norms stored as 1 + w, model.norm as output_norm.
bool qwen3_family(Family f) { return f == Family::qwen3next || f == Family::qwen35 || f == Family::qwen35moe; }

struct HybridArch {
  const char* gguf;
  Family family;
  const char* layer_prefix;  // Hugging Face prefix of block N: prefix + N + "."
};

constexpr HybridArch kHybrids[] = {
    {"mamba", Family::mamba, "backbone.layers."},
    {"mamba2", Family::mamba2, "backbone.layers."},
    {"falcon-h1", Family::falcon_h1, "model.layers."},
    {"lfm2", Family::lfm2, "model.layers."},
    {"lfm2moe", Family::lfm2moe, "model.layers."},
    {"jamba", Family::jamba, "model.layers."},
    {"qwen3next", Family::qwen3next, "model.layers."},
    {"qwen35", Family::qwen35, "model.layers."},
    {"qwen35moe", Family::qwen35moe, "model.layers."},
    {"rwkv7", Family::rwkv7, "model.layers."},  // gguf_rwkv7.h
    {"nemotron_h", Family::nemotron_h, "backbone.layers."},  // gguf_pattern_hybrids.h
    {"nemotron_h_moe", Family::nemotron_h_moe, "backbone.layers."},
    {"granitehybrid", Family::granitehybrid, "model.layers."},
    {"kimi-linear", Family::kimi_linear, "model.layers."},  // gguf_kimi_linear.h
};

const HybridArch* find_hybrid(const GgufFile& f) {
  const GgufValue* v = f.find("general.architecture");
  if (!v || v->type() != GgufType::STRING) return nullptr;
  const std::string& name = v->as_string("general.architecture");
  for (const HybridArch& a : kHybrids)
    if (name == a.gguf) return &a;
  return nullptr;
}

// What a GGUF block tensor becomes, beyond its name.
enum Edit : uint8_t {
  kKeep = 0,
  kConvKernel = 1,  // [C, K] -> [C, 1, K]
  kFlatten = 2,     // [H, 1] or [G, n] -> one dimension
  kNegExp = 4,      // A -> A_log
  kRow = 8,         // [n] -> [1, n]: llama-quantize writes a [1, n] matrix as [n] (ggml_n_dims drops trailing 1s)
};

struct Entry {
  std::string gguf;  // block tensor name after "blk.N.": with its extension, or a base the extension is added to
  std::string hf;
  uint8_t edit = kKeep;
};

// Mamba-1 and Mamba-2 mixers ("mixer." in Mamba's layout, "mamba." in Falcon-H1's and Jamba's).
std::vector<Entry> ssm_entries(Family fam, const char* mixer) {
  const bool m2 = fam != Family::mamba && fam != Family::jamba;  // Jamba's mixers are Mamba-1's
  auto n = [&](const char* s) { return std::string(mixer) + s; };
  return {
      {"ssm_in", n("in_proj")},
      {"ssm_conv1d", n("conv1d"), kConvKernel},
      {"ssm_x", n("x_proj")},
      {"ssm_dt.weight", n("dt_proj.weight")},
      {"ssm_dt.bias", n(m2 ? "dt_bias" : "dt_proj.bias")},
      {"ssm_a", n("A_log"), uint8_t(kNegExp | (m2 ? kFlatten : kKeep))},
      {"ssm_d", n("D"), m2 ? kFlatten : kKeep},
      {"ssm_norm", n("norm"), kFlatten},
      {"ssm_out", n("out_proj")},
  };
}

std::vector<Entry> block_entries(Family fam) {
  switch (fam) {
    case Family::mamba:
    case Family::mamba2: {
      std::vector<Entry> e = ssm_entries(fam, "mixer.");
      e.push_back({"attn_norm", "norm"});
      return e;
    }
    case Family::falcon_h1: {
      std::vector<Entry> e = ssm_entries(fam, "mamba.");
      e.insert(e.end(), {{"attn_norm", "input_layernorm"},
                         {"ffn_norm", "pre_ff_layernorm.weight"},  // gguf-py maps it without an extension
                         {"ffn_norm.weight", "pre_ff_layernorm.weight"},
                         {"attn_q", "self_attn.q_proj"},
                         {"attn_k", "self_attn.k_proj"},
                         {"attn_v", "self_attn.v_proj"},
                         {"attn_output", "self_attn.o_proj"},
                         {"ffn_gate", "feed_forward.gate_proj"},
                         {"ffn_up", "feed_forward.up_proj"},
                         {"ffn_down", "feed_forward.down_proj"}});
      return e;
    }
    case Family::jamba: {
      std::vector<Entry> e = ssm_entries(fam, "mamba.");
      e.insert(e.end(), {{"ssm_dt_norm", "mamba.dt_layernorm"},
                         {"ssm_b_norm", "mamba.b_layernorm"},
                         {"ssm_c_norm", "mamba.c_layernorm"},
                         {"attn_norm", "input_layernorm"},
                         {"ffn_norm", "pre_ff_layernorm"},
                         {"attn_q", "self_attn.q_proj"},
                         {"attn_k", "self_attn.k_proj"},
                         {"attn_v", "self_attn.v_proj"},
                         {"attn_output", "self_attn.o_proj"},
                         {"ffn_gate_inp", "feed_forward.router"},
                         {"ffn_gate", "feed_forward.gate_proj"},
                         {"ffn_up", "feed_forward.up_proj"},
                         {"ffn_down", "feed_forward.down_proj"}});
      return e;
    }
    case Family::lfm2:
    case Family::lfm2moe:
      return {{"attn_norm", "operator_norm"},
              {"ffn_norm", "ffn_norm"},
              {"ffn_gate", "feed_forward.w1"},
              {"ffn_up", "feed_forward.w3"},
              {"ffn_down", "feed_forward.w2"},
              {"shortconv.conv", "conv.conv", kConvKernel},
              {"shortconv.in_proj", "conv.in_proj"},
              {"shortconv.out_proj", "conv.out_proj"},
              {"attn_q", "self_attn.q_proj"},
              {"attn_k", "self_attn.k_proj"},
              {"attn_v", "self_attn.v_proj"},
              {"attn_output", "self_attn.out_proj"},
              {"attn_q_norm", "self_attn.q_layernorm"},
              {"attn_k_norm", "self_attn.k_layernorm"},
              {"ffn_gate_inp", "feed_forward.gate"},  // LFM2-MoE's router and its choice bias
              {"exp_probs_b.bias", "feed_forward.expert_bias"}};
    case Family::qwen3next:
    case Family::qwen35:
    case Family::qwen35moe: {
      std::vector<Entry> e = ssm_entries(fam, "linear_attn.");
      if (fam == Family::qwen3next)
        e.push_back({"ssm_ba", "linear_attn.in_proj_ba"});
      else  // Qwen3.5's separate in_proj_qkv / z / b / a
        e.insert(e.end(), {{"attn_qkv", "linear_attn.in_proj_qkv"},
                           {"attn_gate", "linear_attn.in_proj_z"},
                           {"ssm_beta", "linear_attn.in_proj_b"},
                           {"ssm_alpha", "linear_attn.in_proj_a"}});
      e.insert(e.end(), {{"attn_norm", "input_layernorm"},
                         {"post_attention_norm", "post_attention_layernorm"},
                         {"attn_q", "self_attn.q_proj"},
                         {"attn_k", "self_attn.k_proj"},
                         {"attn_v", "self_attn.v_proj"},
                         {"attn_output", "self_attn.o_proj"},
                         {"attn_q_norm", "self_attn.q_norm"},
                         {"attn_k_norm", "self_attn.k_norm"},
                         {"ffn_gate_inp", "mlp.gate"},
                         {"ffn_gate_shexp", "mlp.shared_expert.gate_proj"},
                         {"ffn_up_shexp", "mlp.shared_expert.up_proj"},
                         {"ffn_down_shexp", "mlp.shared_expert.down_proj"},
                         {"ffn_gate_inp_shexp", "mlp.shared_expert_gate", kRow},
                         {"ffn_gate", "mlp.gate_proj"},
                         {"ffn_up", "mlp.up_proj"},
                         {"ffn_down", "mlp.down_proj"}});
      return e;
    }
    case Family::nemotron_h:
    case Family::nemotron_h_moe: {  // every sublayer is the block's "mixer"
      std::vector<Entry> e = ssm_entries(fam, "mixer.");
      if (fam == Family::nemotron_h_moe)  // the routed experts: gguf_hf::add_expert_slices
        e.insert(e.end(), {{"ffn_gate_inp", "mixer.gate"},
                           {"exp_probs_b.bias", "mixer.gate.e_score_correction_bias"},
                           {"ffn_up_shexp", "mixer.shared_experts.up_proj"},
                           {"ffn_down_shexp", "mixer.shared_experts.down_proj"}});
      e.insert(e.end(), {{"attn_norm", "norm"},
                         {"attn_q", "mixer.q_proj"},
                         {"attn_k", "mixer.k_proj"},
                         {"attn_v", "mixer.v_proj"},
                         {"attn_output", "mixer.o_proj"},
                         {"ffn_up", "mixer.up_proj"},
                         {"ffn_down", "mixer.down_proj"}});
      return e;
    }
    case Family::granitehybrid: {  // the dense MLP and the shared expert both read as shared_mlp
      std::vector<Entry> e = ssm_entries(fam, "mamba.");
      e.insert(e.end(), {{"attn_norm", "input_layernorm"},
                         {"ffn_norm", "post_attention_layernorm"},
                         {"attn_q", "self_attn.q_proj"},
                         {"attn_k", "self_attn.k_proj"},
                         {"attn_v", "self_attn.v_proj"},
                         {"attn_output", "self_attn.o_proj"},
                         {"ffn_gate_inp", "block_sparse_moe.router.layer"},
                         {"ffn_gate_shexp", "shared_mlp.gate_proj"},
                         {"ffn_up_shexp", "shared_mlp.up_proj"},
                         {"ffn_down_shexp", "shared_mlp.output_linear"},
                         {"ffn_gate", "shared_mlp.gate_proj"},
                         {"ffn_up", "shared_mlp.up_proj"},
                         {"ffn_down", "shared_mlp.output_linear"}});
      return e;
    }
    case Family::rwkv7:
    case Family::kimi_linear:
      break;
  }
  return {};
}

const char* global_hf_name(Family fam, const std::string& name) {
  const bool backbone =
      fam == Family::mamba || fam == Family::mamba2 || fam == Family::nemotron_h || fam == Family::nemotron_h_moe;
  if (name == "token_embd.weight") return backbone ? "backbone.embeddings.weight" : "model.embed_tokens.weight";
  if (name == "output.weight") return "lm_head.weight";
  if (name == "output_norm.weight") {
    if (backbone) return "backbone.norm_f.weight";
    if (fam == Family::falcon_h1 || fam == Family::jamba) return "model.final_layernorm.weight";
    if (qwen3_family(fam) || fam == Family::granitehybrid) return "model.norm.weight";
  }
  if (name == "token_embd_norm.weight" && (fam == Family::lfm2 || fam == Family::lfm2moe))
    return "model.embedding_norm.weight";
  return nullptr;
}

void mamba_config(JsonObject& c, const Meta& m, bool v2) {
  const int64_t hidden = m.positive("embedding_length"), inner = m.positive("ssm.inner_size");
  const bool falcon = !v2 && m.has("ssm.dt_b_c_rms") && m.f.find(m.p + "ssm.dt_b_c_rms")->as_bool(m.p + "ssm.dt_b_c_rms");
  if (v2) {
    add_class(c, "Mamba2ForCausalLM", "mamba2");
  } else if (falcon) {
    add_class(c, "FalconMambaForCausalLM", "falcon_mamba");
    c.add_float("mixer_rms_eps", m.eps());  // llama.cpp normalizes dt, B and C with the layer epsilon
  } else {
    add_class(c, "MambaForCausalLM", "mamba");
  }
  c.add_int("hidden_size", hidden);
  c.add_int("num_hidden_layers", m.layers());
  c.add_int("state_size", m.count("ssm.state_size", "state_size"));
  c.add_int("conv_kernel", m.count("ssm.conv_kernel", "conv_kernel"));
  c.add_int("expand", m.ratio(inner, "ssm.inner_size", hidden, "embedding_length"));
  c.add_float("layer_norm_epsilon", m.eps());
  c.add_bool("use_conv_bias", any_block_has(m.f, "ssm_conv1d.bias"));
  c.add_bool("use_bias", any_block_has(m.f, "ssm_in.bias"));
  c.add_string("hidden_act", "silu");
  if (v2) {
    const int64_t heads = m.count("ssm.time_step_rank", "num_heads");
    c.add_int("num_heads", heads);
    c.add_int("head_dim", m.ratio(inner, "ssm.inner_size", heads, "ssm.time_step_rank"));
    c.add_int("n_groups", m.has("ssm.group_count") ? m.count("ssm.group_count", "n_groups") : 1);
    c.add_bool("rms_norm", true);
    c.add_bool("norm_before_gate", false);
  } else {
    c.add_int("intermediate_size", inner);
    c.add_int("time_step_rank", m.positive("ssm.time_step_rank"));
  }
}

void falcon_h1_config(JsonObject& c, const Meta& m) {
  add_class(c, "FalconH1ForCausalLM", "falcon_h1");
  const int64_t heads = m.count("attention.head_count", "num_attention_heads"), inner = m.positive("ssm.inner_size");
  const int64_t ssm_heads = m.count("ssm.time_step_rank", "mamba_n_heads");
  c.add_int("hidden_size", m.positive("embedding_length"));
  c.add_int("num_hidden_layers", m.layers());
  c.add_int("intermediate_size", m.positive("feed_forward_length"));
  c.add_int("num_attention_heads", heads);
  c.add_int("num_key_value_heads",
            m.has("attention.head_count_kv") ? m.count("attention.head_count_kv", "num_key_value_heads") : heads);
  c.add_int("head_dim", m.has("attention.key_length") ? m.positive("attention.key_length")
                                                      : m.positive("embedding_length") / heads);
  c.add_float("rope_theta", m.has("rope.freq_base") ? m.d("rope.freq_base") : 10000.0);
  if (m.has("context_length")) c.add_int("max_position_embeddings", m.i("context_length"));
  c.add_float("rms_norm_eps", m.eps());
  c.add_int("mamba_d_ssm", inner);
  c.add_int("mamba_n_heads", ssm_heads);
  c.add_int("mamba_d_head", m.ratio(inner, "ssm.inner_size", ssm_heads, "ssm.time_step_rank"));
  c.add_int("mamba_n_groups", m.has("ssm.group_count") ? m.count("ssm.group_count", "n_groups") : 1);
  c.add_int("mamba_d_state", m.count("ssm.state_size", "state_size"));
  c.add_int("mamba_d_conv", m.count("ssm.conv_kernel", "conv_kernel"));
  c.add_bool("mamba_rms_norm", any_block_has(m.f, "ssm_norm.weight"));
  c.add_bool("mamba_norm_before_gate", false);
  c.add_bool("mamba_conv_bias", any_block_has(m.f, "ssm_conv1d.bias"));
  c.add_bool("mamba_proj_bias", any_block_has(m.f, "ssm_in.bias"));
  c.add_bool("projectors_bias", any_block_has(m.f, "ssm_out.bias"));
  c.add_bool("attention_bias", any_block_has(m.f, "attn_q.bias"));
  c.add_bool("mlp_bias", any_block_has(m.f, "ffn_up.bias"));
  c.add_string("hidden_act", "silu");
  // Folded into the weights by the converter (and not stored): the identity from here on.
  for (const char* k : {"attention_in_multiplier", "attention_out_multiplier", "key_multiplier", "ssm_in_multiplier",
                        "ssm_out_multiplier", "embedding_multiplier", "lm_head_multiplier"})
    c.add_float(k, 1.0);
  c.add("mlp_multipliers", "[1.0, 1.0]");
  c.add("ssm_multipliers", "[1.0, 1.0, 1.0, 1.0, 1.0]");
}

// Jamba's layer kinds repeat with a period (attn_layer_period / offset, expert_layer_period / offset): the
// smallest period whose pattern `flags` follows, and its offset (no flag set: period layers + 1, offset layers).
std::pair<int64_t, int64_t> period_of(const std::vector<bool>& flags, const GgufFile& f, const std::string& what) {
  const int64_t n = int64_t(flags.size());
  int64_t first = 0;
  while (first < n && !flags[size_t(first)]) ++first;
  if (first == n) return {n + 1, n};
  for (int64_t p = first + 1; p <= n; ++p) {
    bool ok = true;
    for (int64_t i = 0; ok && i < n; ++i) ok = flags[size_t(i)] == (i % p == first);
    if (ok) return {p, first};
  }
  throw LoadError(f.path() + ": " + what + " do not repeat with a period (JambaConfig's attn_layer_period / "
                  "expert_layer_period)");
}

void jamba_config(JsonObject& c, const Meta& m) {
  add_class(c, "JambaForCausalLM", "jamba");
  const int64_t layers = m.layers(), heads = m.count("attention.head_count", "num_attention_heads");
  const int64_t hidden = m.positive("embedding_length"), inner = m.positive("ssm.inner_size");
  c.add_int("hidden_size", hidden);
  c.add_int("num_hidden_layers", layers);
  c.add_int("intermediate_size", m.positive("feed_forward_length"));
  c.add_int("num_attention_heads", heads);
  const AttentionLayers attn = attention_layers(m, layers, heads);
  c.add_int("num_key_value_heads", attn.kv_heads);
  const auto [attn_period, attn_offset] = period_of(attn.attends, m.f, "the attention layers (head_count_kv)");
  c.add_int("attn_layer_period", attn_period);
  c.add_int("attn_layer_offset", attn_offset);
  std::vector<bool> moe;
  for (int64_t i = 0; i < layers; ++i)
    moe.push_back(m.f.find_tensor("blk." + std::to_string(i) + ".ffn_gate_inp.weight") != nullptr);
  const auto [expert_period, expert_offset] = period_of(moe, m.f, "the MoE layers (ffn_gate_inp)");
  c.add_int("expert_layer_period", expert_period);
  c.add_int("expert_layer_offset", expert_offset);
  c.add_int("num_experts", m.has("expert_count") ? m.count("expert_count", "num_experts") : 1);
  c.add_int("num_experts_per_tok", m.has("expert_used_count") ? m.count("expert_used_count", "num_experts_per_tok") : 1);
  c.add_int("mamba_d_state", m.count("ssm.state_size", "state_size"));
  c.add_int("mamba_d_conv", m.count("ssm.conv_kernel", "conv_kernel"));
  c.add_int("mamba_expand", m.ratio(inner, "ssm.inner_size", hidden, "embedding_length"));
  c.add_int("mamba_dt_rank", m.positive("ssm.time_step_rank"));
  c.add_bool("mamba_conv_bias", any_block_has(m.f, "ssm_conv1d.bias"));
  c.add_bool("mamba_proj_bias", any_block_has(m.f, "ssm_in.bias"));
  c.add_float("rms_norm_eps", m.eps());
  if (m.has("context_length")) c.add_int("max_position_embeddings", m.i("context_length"));
  c.add_string("hidden_act", "silu");
}

void lfm2_config(JsonObject& c, const Meta& m, bool moe) {
  if (moe) {  // LFM2-MoE: sigmoid routing with the choice bias exp_probs_b, top-k renormalized
    add_class(c, "Lfm2MoeForCausalLM", "lfm2_moe");
    c.add_int("num_experts", m.count("expert_count", "num_experts"));
    c.add_int("num_experts_per_tok", m.count("expert_used_count", "num_experts_per_tok"));
    c.add_int("moe_intermediate_size", m.positive("expert_feed_forward_length"));
    c.add_int("num_dense_layers", m.has("leading_dense_block_count") ? m.i("leading_dense_block_count") : 0);
    c.add_bool("use_expert_bias", any_block_has(m.f, "exp_probs_b.bias"));
    c.add_bool("norm_topk_prob", true);
    c.add_float("routed_scaling_factor", m.has("expert_weights_scale") ? m.d("expert_weights_scale") : 1.0);
  } else {
    add_class(c, "Lfm2ForCausalLM", "lfm2");
  }
  const int64_t layers = m.layers(), heads = m.count("attention.head_count", "num_attention_heads");
  c.add_int("hidden_size", m.positive("embedding_length"));
  c.add_int("num_hidden_layers", layers);
  c.add_int("intermediate_size", m.positive("feed_forward_length"));
  c.add_bool("block_auto_adjust_ff_dim", false);  // the converter stores the adjusted size
  c.add_int("num_attention_heads", heads);
  const AttentionLayers attn = attention_layers(m, layers, heads);
  std::string types = "[";
  for (size_t i = 0; i < attn.attends.size(); ++i)
    types += std::string(i ? ", " : "") + (attn.attends[i] ? "\"full_attention\"" : "\"conv\"");
  c.add("layer_types", types + "]");
  c.add_int("num_key_value_heads", attn.kv_heads);
  c.add_int("conv_L_cache", m.positive("shortconv.l_cache"));
  c.add_bool("conv_bias", any_block_has(m.f, "shortconv.in_proj.bias"));
  c.add_float("norm_eps", m.eps());
  c.add_float("rope_theta", m.has("rope.freq_base") ? m.d("rope.freq_base") : 1000000.0);
  if (m.has("context_length")) c.add_int("max_position_embeddings", m.i("context_length"));
  c.add_bool("tie_embedding", m.f.find_tensor("output.weight") == nullptr);
}

}  // namespace

std::string gguf_hybrid_config_json(const GgufFile& f) {
  const HybridArch& a = *find_hybrid(f);
  if (a.family == Family::rwkv7) return gguf_rwkv7_config_json(f);
  if (a.family == Family::kimi_linear) return gguf_kimi_linear_config_json(f);
  const Meta m{f, std::string(a.gguf) + "."};
  JsonObject c;
  switch (a.family) {
    case Family::mamba: mamba_config(c, m, false); break;
    case Family::mamba2: mamba_config(c, m, true); break;
    case Family::falcon_h1: falcon_h1_config(c, m); break;
    case Family::lfm2: lfm2_config(c, m, false); break;
    case Family::lfm2moe: lfm2_config(c, m, true); break;
    case Family::jamba: jamba_config(c, m); break;
    case Family::qwen3next: qwen3_hybrid_config(c, m, Qwen3Hybrid::next); break;
    case Family::qwen35: qwen3_hybrid_config(c, m, Qwen3Hybrid::dense35); break;
    case Family::qwen35moe: qwen3_hybrid_config(c, m, Qwen3Hybrid::moe35); break;
    case Family::nemotron_h: nemotron_h_config(c, m, false); break;
    case Family::nemotron_h_moe: nemotron_h_config(c, m, true); break;
    case Family::granitehybrid: granite_hybrid_config(c, m); break;
    case Family::rwkv7:
    case Family::kimi_linear: break;
  }
  gguf_hf::add_vocab_and_dtype(c, f);
  return c.str();
}

bool gguf_is_hybrid(const GgufFile& f) { return find_hybrid(f) != nullptr; }

std::vector<std::string> gguf_hybrid_architectures() {
  std::vector<std::string> out;
  for (const HybridArch& a : kHybrids) out.emplace_back(a.gguf);
  return out;
}

std::optional<std::string> gguf_hybrid_tensor_name(const std::string& gguf_arch, const std::string& hf_name) {
  const HybridArch* a = nullptr;
  for (const HybridArch& x : kHybrids)
    if (gguf_arch == x.gguf) a = &x;
  if (!a || a->family == Family::rwkv7 || a->family == Family::kimi_linear) return std::nullopt;
  for (const char* g : {"token_embd.weight", "output.weight", "output_norm.weight", "token_embd_norm.weight"})
    if (const char* h = global_hf_name(a->family, g); h && hf_name == h) return std::string(g);
  const std::string prefix = a->layer_prefix;
  if (!hf_name.starts_with(prefix)) return std::nullopt;
  const size_t dot = hf_name.find('.', prefix.size());
  if (dot == std::string::npos) return std::nullopt;
  const std::string layer = hf_name.substr(prefix.size(), dot - prefix.size());
  if (!gguf_hf::split_block("blk." + layer + ".x")) return std::nullopt;  // a plain decimal layer index
  const std::string rest = hf_name.substr(dot + 1), blk = "blk." + layer + ".";
  // An entry naming its extension wins over one without (Falcon-H1 lists ffn_norm both ways), an exact entry over
  // a base the extension is added to.
  std::optional<std::string> exact, based;
  for (const Entry& e : block_entries(a->family)) {
    if (rest == e.hf) {
      if (!exact || e.gguf.find('.') != std::string::npos) exact = blk + e.gguf;
    } else if (!based && rest.starts_with(e.hf)) {
      const std::string ext = rest.substr(e.hf.size());
      if (ext == ".weight" || ext == ".bias") based = blk + e.gguf + ext;
    }
  }
  return exact ? exact : based;
}

std::vector<GgufHfTensor> gguf_hybrid_tensors(const GgufFile& f) {
  const HybridArch& a = *find_hybrid(f);
  if (a.family == Family::rwkv7) return gguf_rwkv7_tensors(f);
  if (a.family == Family::kimi_linear) return gguf_kimi_linear_tensors(f);
  const std::vector<Entry> entries = block_entries(a.family);
  const int64_t mtp_from = a.family == Family::qwen35 || a.family == Family::qwen35moe
                               ? qwen35_text_layers(gguf_hf::Meta{f, std::string(a.gguf) + "."})
                               : -1;
  const bool permuted_qk =
      a.family == Family::nemotron_h || a.family == Family::nemotron_h_moe || a.family == Family::granitehybrid;
  const std::pair<int64_t, int64_t> heads =
      permuted_qk ? pattern_hybrid_heads(gguf_hf::Meta{f, std::string(a.gguf) + "."}) : std::pair<int64_t, int64_t>{};
  std::vector<GgufHfTensor> out;
  for (const GgufTensor& t : f.tensors()) {
    if (const char* g = global_hf_name(a.family, t.name)) {
      out.push_back(gguf_hf::as_stored(t, g));
      if (qwen3_family(a.family) && t.name == "output_norm.weight") out.back().fix = GgufFix::subtract_one;
      continue;
    }
    const auto blk = gguf_hf::split_block(t.name);
    if (!blk) fail(f, t.name, std::string("no Hugging Face counterpart for a ") + a.gguf + " model");
    const std::string& rest = blk->second;
    const std::string layer = a.layer_prefix + std::to_string(blk->first) + ".";
    const size_t dot = rest.rfind('.');
    const std::string ext = dot == std::string::npos ? "" : rest.substr(dot);
    const std::string base = rest.substr(0, rest.size() - ext.size());
    if (mtp_from >= 0 && blk->first >= mtp_from) continue;  // Qwen3.5's multi-token-prediction blocks
    if (a.family == Family::lfm2moe &&
        gguf_hf::add_expert_slices(f, t, layer + "feed_forward.experts.", base, out, {"w1", "w3", "w2"}))
      continue;
    if (a.family == Family::jamba && gguf_hf::add_expert_slices(f, t, layer + "feed_forward.experts.", base, out))
      continue;
    if (a.family == Family::granitehybrid &&
        gguf_hf::add_expert_slices(f, t, layer + "block_sparse_moe.experts.", base, out))
      continue;
    if (a.family == Family::nemotron_h_moe && gguf_hf::add_expert_slices(f, t, layer + "mixer.experts.", base, out))
      continue;
    if (qwen3_family(a.family)) {
      if (gguf_hf::add_expert_slices(f, t, layer + "mlp.experts.", base, out)) continue;
      if (a.family == Family::qwen3next && rest == "attn_qkv.weight") {
        for (GgufHfTensor& h : qwen3next_in_proj(f, t, layer)) out.push_back(std::move(h));
        continue;
      }
      if (a.family == Family::qwen3next && rest == "attn_gate.weight") continue;  // taken with attn_qkv
    }
    const Entry* e = nullptr;
    std::string hf;
    for (const Entry& x : entries)
      if (rest == x.gguf) e = &x, hf = layer + x.hf;
    if (!e)
      for (const Entry& x : entries)
        if (base == x.gguf) e = &x, hf = layer + x.hf + ext;
    if (!e) fail(f, t.name, std::string("no Hugging Face counterpart for a ") + a.gguf + " model");
    GgufHfTensor h = gguf_hf::as_stored(t, hf);
    if ((e->edit & kConvKernel) && ext == ".weight") {
      if (h.shape.size() != 2) fail(f, t.name, "expected a squeezed [channels, kernel] convolution");
      h.shape = {h.shape[0], 1, h.shape[1]};
    }
    if (e->edit & kFlatten) h.shape = {t.numel()};
    if ((e->edit & kRow) && h.shape.size() == 1) h.shape = {1, h.shape[0]};
    if (permuted_qk && (base == "attn_q" || base == "attn_k")) {
      h.fix = GgufFix::unpermute_rope_rows;
      h.heads = base == "attn_q" ? heads.first : heads.second;
      if (h.shape.empty() || h.shape[0] % (2 * h.heads) != 0)
        fail(f, t.name, "rows do not split into " + std::to_string(h.heads) + " heads of even size");
      if (t.ne.size() == 1 && quant_type_info(uint32_t(t.type))->block_elems != 1)
        fail(f, t.name, "a quantized 1-D tensor cannot be permuted row by row");
    }
    if (e->edit & kNegExp) h.fix = GgufFix::log_of_negated;
    if (qwen3_family(a.family) && ext == ".weight" && base.ends_with("norm") && base != "ssm_norm")
      h.fix = GgufFix::subtract_one;
    if (h.fix != GgufFix::none && h.fix != GgufFix::unpermute_rope_rows && !gguf_hf::plain_float(t.type))
      fail(f, t.name, std::string("stored as ") + quant_type_name(t.type) + ", which cannot be turned back into '" + hf +
                          "' (F32, F16 or BF16 expected)");
    if (a.family == Family::qwen35 || a.family == Family::qwen35moe) mark_value_heads(f, t, base, h);
    out.push_back(std::move(h));
  }
  return out;
}

}  // namespace attnzoo

namespace attnzoo::gguf_hf {

AttentionLayers attention_layers(const Meta& m, int64_t layers, int64_t heads) {
  const std::string key = m.p + "attention.head_count_kv";
  std::vector<int64_t> kv(size_t(layers), heads);
  if (const GgufValue* v = m.f.find(key); v && v->is_array()) {
    if (int64_t(v->size()) != layers)
      throw LoadError(m.f.path() + ": key '" + key + "': expected " + std::to_string(layers) + " counts (one per layer)");
    for (uint64_t i = 0; i < v->size(); ++i) kv[i] = v->at(i).as_int(key);
  } else if (v) {
    std::fill(kv.begin(), kv.end(), m.i("attention.head_count_kv"));
  }
  AttentionLayers out;
  for (size_t i = 0; i < kv.size(); ++i) {
    if (kv[i] < 0 || kv[i] > config_count_limit("num_key_value_heads") ||
        (out.kv_heads && kv[i] && kv[i] != out.kv_heads))
      throw LoadError(m.f.path() + ": key '" + key + "': attention layers must share one positive count");
    if (kv[i]) out.kv_heads = kv[i];
    out.attends.push_back(kv[i] != 0);
  }
  if (!out.kv_heads) out.kv_heads = heads;
  return out;
}

}  // namespace attnzoo::gguf_hf
