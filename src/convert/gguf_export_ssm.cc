#include "convert/gguf_export_ssm.h"

#include "convert/gguf_export_hybrids.h"
#include "core/checked.h"
#include "loader/gguf_hybrids.h"
#include "loader/load_error.h"
#include "models/hf_config.h"

namespace attnzoo {
namespace {

// The Mamba-2 mixer's (inner, heads, groups) of Mamba-2 or Falcon-H1, checked against each other.
struct Mamba2Sizes {
  int64_t inner, heads, groups;
};

Mamba2Sizes mamba2_sizes(const Config& c, const std::string& arch) {
  const bool falcon = arch == "falcon-h1";
  const int64_t hidden = c.get_int("hidden_size");
  const char* head_key = falcon ? "mamba_d_head" : "head_dim";
  const char* groups_key = falcon ? "mamba_n_groups" : "n_groups";
  const char* heads_key = falcon ? "mamba_n_heads" : "num_heads";
  const int64_t head_dim = c.get_int_or(head_key, 64), groups = c.get_int_or(groups_key, 1);
  const int64_t expanded = checked_mul(c.get_int_or(falcon ? "mamba_expand" : "expand", 2), hidden, "expand * hidden");
  const int64_t inner = falcon ? c.get_int_or("mamba_d_ssm", expanded) : expanded;
  if (head_dim <= 0 || inner % head_dim != 0)
    throw LoadError(c.source() + ": key '" + head_key + "': " + std::to_string(head_dim) +
                    " does not divide the mixer's inner size " + std::to_string(inner));
  const int64_t heads = inner / head_dim;
  if (c.has(heads_key) && c.get_int(heads_key) != heads)
    throw LoadError(c.source() + ": key '" + heads_key + "': " + std::to_string(c.get_int(heads_key)) +
                    " heads of " + std::to_string(head_dim) + " is not the mixer's inner size " + std::to_string(inner));
  if (groups <= 0 || inner % groups != 0)
    throw LoadError(c.source() + ": key '" + groups_key + "': must divide the mixer's inner size " +
                    std::to_string(inner));
  return {inner, heads, groups};
}

// FalconH1Model.modify_tensors: the muP multipliers multiplied into the tensor they follow (biases included),
// matched by name in the converter's order; in_proj's five row bands ([z, x, B, C, dt]) each by its own.
void fold_falcon_multipliers(const Config& c, const Mamba2Sizes& s, const std::string& name, int64_t cols,
                             TensorPlan& p) {
  const auto has = [&](const char* part) { return name.find(part) != std::string::npos; };
  const auto all = [&](double f) { p.scales.push_back({0, INT64_MAX, f}); };
  const auto list = [&](const char* key, size_t n) {
    const std::vector<double> v = c.has(key) ? c.get_float_list(key) : std::vector<double>(n, 1.0);
    if (v.size() != n) throw LoadError(c.source() + ": key '" + key + "': expected " + std::to_string(n) + " values");
    return v;
  };
  if (has("down_proj")) {
    all(list("mlp_multipliers", 2)[1]);
  } else if (has("gate_proj")) {
    all(list("mlp_multipliers", 2)[0]);
  } else if (has("k_proj")) {
    all(c.get_float_or("key_multiplier", 1.0));
    all(c.get_float_or("attention_in_multiplier", 1.0));
  } else if (has("q_proj") || has("v_proj")) {
    all(c.get_float_or("attention_in_multiplier", 1.0));
  } else if (has("o_proj")) {
    all(c.get_float_or("attention_out_multiplier", 1.0));
  } else if (has("out_proj")) {
    all(c.get_float_or("ssm_out_multiplier", 1.0));
  } else if (has("in_proj")) {
    all(c.get_float_or("ssm_in_multiplier", 1.0));
    const std::vector<double> m = list("ssm_multipliers", 5);
    const int64_t gs = checked_mul(s.groups, c.get_int_or("mamba_d_state", 256), "groups * state");
    const int64_t bounds[6] = {0, s.inner, 2 * s.inner, 2 * s.inner + gs, 2 * s.inner + 2 * gs, INT64_MAX / cols};
    for (size_t k = 0; k < 5; ++k) p.scales.push_back({bounds[k] * cols, bounds[k + 1] * cols, m[k]});
  } else if (has("lm_head")) {
    all(c.get_float_or("lm_head_multiplier", 1.0));
  } else if (has("embed_tokens")) {
    all(c.get_float_or("embedding_multiplier", 1.0));
  }
}

}  // namespace

std::optional<std::string> ssm_arch_for_hf(const std::string& hf_class) {
  if (hf_class == "MambaForCausalLM" || hf_class == "FalconMambaForCausalLM") return "mamba";
  if (hf_class == "Mamba2ForCausalLM") return "mamba2";
  if (hf_class == "FalconH1ForCausalLM") return "falcon-h1";
  return std::nullopt;
}

void add_ssm_hparams(GgufWriter& w, const Config& c, const std::string& hf_class, const std::string& arch) {
  const std::string p = arch + ".";
  const bool falcon = arch == "falcon-h1";
  const int64_t hidden = c.get_int("hidden_size");
  w.add_u32(p + "block_count", uint32_t(c.get_int("num_hidden_layers")));
  w.add_u32(p + "embedding_length", uint32_t(hidden));
  w.add_u32(p + "ssm.conv_kernel", uint32_t(c.get_int_or(falcon ? "mamba_d_conv" : "conv_kernel", 4)));
  w.add_u32(p + "ssm.state_size",
            uint32_t(c.get_int_or(falcon ? "mamba_d_state" : "state_size", arch == "mamba" ? 16 : 128)));
  if (arch == "mamba") {
    w.add_u32(p + "ssm.inner_size", uint32_t(c.get_int_or("intermediate_size", c.get_int_or("expand", 2) * hidden)));
    w.add_u32(p + "ssm.time_step_rank", uint32_t(c.get_int_or("time_step_rank", (hidden + 15) / 16)));
    w.add_bool(p + "ssm.dt_b_c_rms", hf_class == "FalconMambaForCausalLM");
  } else {
    const Mamba2Sizes s = mamba2_sizes(c, arch);
    w.add_u32(p + "ssm.inner_size", uint32_t(s.inner));
    w.add_u32(p + "ssm.time_step_rank", uint32_t(s.heads));
    w.add_u32(p + "ssm.group_count", uint32_t(s.groups));
  }
  if (!falcon) {
    w.add_u32(p + "context_length", uint32_t(1) << 20);  // no positions: the converter's "unlimited"
    w.add_u32(p + "feed_forward_length", 0);
    w.add_u32(p + "attention.head_count", 0);
    w.add_f32(p + "attention.layer_norm_rms_epsilon", float(c.get_float_or("layer_norm_epsilon", 1e-5)));
    return;
  }
  // Falcon-H1: llama.cpp's gated norm gates before normalizing, and its file has no key to say otherwise
  if (c.get_bool_or("mamba_rms_norm", false) && c.get_bool_or("mamba_norm_before_gate", true))
    throw LoadError(c.source() + ": key 'mamba_norm_before_gate': GGUF (llama.cpp's falcon-h1) normalizes after "
                    "the gate; true cannot be written");
  const int64_t heads = c.get_int("num_attention_heads"), head_dim = c.get_int_or("head_dim", hidden / heads);
  w.add_u32(p + "context_length", uint32_t(c.get_int_or("max_position_embeddings", 0)));
  w.add_u32(p + "feed_forward_length", uint32_t(c.get_int("intermediate_size")));
  w.add_u32(p + "attention.head_count", uint32_t(heads));
  w.add_u32(p + "attention.head_count_kv", uint32_t(c.get_int_or("num_key_value_heads", heads)));
  w.add_u32(p + "attention.key_length", uint32_t(head_dim));
  w.add_u32(p + "attention.value_length", uint32_t(head_dim));
  w.add_f32(p + "attention.layer_norm_rms_epsilon", float(c.get_float_or("rms_norm_eps", 1e-5)));
  w.add_u32(p + "vocab_size", uint32_t(c.get_int("vocab_size")));
  w.add_f32(p + "rope.freq_base", float(read_rope(c, head_dim, kWholeHead).theta));
}

std::vector<TensorPlan> plan_ssm(const ModelFiles& files, const Config& c, const std::string& arch, bool tied) {
  const bool m2 = arch != "mamba", falcon = arch == "falcon-h1";
  const Mamba2Sizes s = m2 ? mamba2_sizes(c, arch) : Mamba2Sizes{};
  if (falcon && tied && c.get_float_or("lm_head_multiplier", 1.0) != c.get_float_or("embedding_multiplier", 1.0))
    throw LoadError(c.source() + ": key 'lm_head_multiplier': a tied head's multiplier must equal "
                    "embedding_multiplier (the converter folds both into the one embedding table)");
  std::vector<TensorPlan> plans;
  for (const std::string& name : files.names()) {
    if (name == "lm_head.weight" && tied) continue;
    const auto gguf_name = gguf_hybrid_tensor_name(arch, name);
    if (!gguf_name) throw LoadError(files.source(name) + ": tensor '" + name + "' has no GGUF counterpart for " + arch);
    TensorPlan p;
    p.gguf_name = *gguf_name;
    // gguf-py maps Falcon-H1's pre_ff_layernorm.weight whole, so the converter's name has no extension
    if (falcon && p.gguf_name.ends_with("ffn_norm.weight")) p.gguf_name.resize(p.gguf_name.size() - 7);
    p.sources = {name};
    p.shape = files.stored(name).shape;
    const bool edited = plan_ssm_edit(files, name, p);  // A (F32, -exp) and the squeezed conv kernels (F32)
    const int64_t numel = files.stored(name).numel();
    if (name.ends_with(".D")) p.type = QuantType::F32;
    if (m2 && (name.ends_with(".A_log") || name.ends_with(".D"))) {
      if (numel != s.heads)
        throw LoadError(files.source(name) + ": tensor '" + name + "': expected " + std::to_string(s.heads) +
                        " values (one per head)");
      p.shape = {s.heads, 1};
    } else if (m2 && !edited && (name.ends_with(".mixer.norm.weight") || name.ends_with(".mamba.norm.weight"))) {
      if (numel != s.inner)
        throw LoadError(files.source(name) + ": tensor '" + name + "': expected " + std::to_string(s.inner) +
                        " values (the mixer's inner size)");
      p.shape = {s.groups, s.inner / s.groups};
      p.type = QuantType::F32;
    }
    if (falcon && !edited) fold_falcon_multipliers(c, s, name, p.shape.size() == 1 ? 1 : p.shape.back(), p);
    plans.push_back(std::move(p));
  }
  return plans;
}

}  // namespace attnzoo
