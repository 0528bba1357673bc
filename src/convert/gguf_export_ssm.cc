#include "convert/gguf_export_ssm.h"

#include "convert/gguf_export_hybrids.h"
#include "core/checked.h"
#include "loader/gguf_hybrids.h"
#include "loader/load_error.h"

namespace attnzoo {
namespace {

// Mamba-2's (inner, heads, groups), checked against each other.
struct Mamba2Sizes {
  int64_t inner, heads, groups;
};

Mamba2Sizes mamba2_sizes(const Config& c) {
  const int64_t hidden = c.get_int("hidden_size"), head_dim = c.get_int_or("head_dim", 64);
  const int64_t inner = checked_mul(c.get_int_or("expand", 2), hidden, "expand * hidden_size");
  const int64_t groups = c.get_int_or("n_groups", 1);
  if (head_dim <= 0 || inner % head_dim != 0)
    throw LoadError(c.source() + ": key 'head_dim': " + std::to_string(head_dim) + " does not divide expand * " +
                    "hidden_size = " + std::to_string(inner));
  const int64_t heads = inner / head_dim;
  if (c.has("num_heads") && c.get_int("num_heads") != heads)
    throw LoadError(c.source() + ": key 'num_heads': " + std::to_string(c.get_int("num_heads")) +
                    " heads of head_dim " + std::to_string(head_dim) + " is not expand * hidden_size = " +
                    std::to_string(inner));
  if (groups <= 0 || inner % groups != 0)
    throw LoadError(c.source() + ": key 'n_groups': must divide expand * hidden_size = " + std::to_string(inner));
  return {inner, heads, groups};
}

}  // namespace

std::optional<std::string> ssm_arch_for_hf(const std::string& hf_class) {
  if (hf_class == "MambaForCausalLM" || hf_class == "FalconMambaForCausalLM") return "mamba";
  if (hf_class == "Mamba2ForCausalLM") return "mamba2";
  return std::nullopt;
}

void add_ssm_hparams(GgufWriter& w, const Config& c, const std::string& hf_class, const std::string& arch) {
  const std::string p = arch + ".";
  const int64_t hidden = c.get_int("hidden_size");
  w.add_u32(p + "context_length", uint32_t(1) << 20);  // no positions: the converter's "unlimited"
  w.add_u32(p + "embedding_length", uint32_t(hidden));
  w.add_u32(p + "feed_forward_length", 0);
  w.add_u32(p + "attention.head_count", 0);
  w.add_u32(p + "block_count", uint32_t(c.get_int("num_hidden_layers")));
  w.add_u32(p + "ssm.conv_kernel", uint32_t(c.get_int_or("conv_kernel", 4)));
  w.add_u32(p + "ssm.state_size", uint32_t(c.get_int_or("state_size", arch == "mamba" ? 16 : 128)));
  if (arch == "mamba") {
    w.add_u32(p + "ssm.inner_size", uint32_t(c.get_int_or("intermediate_size", c.get_int_or("expand", 2) * hidden)));
    w.add_u32(p + "ssm.time_step_rank", uint32_t(c.get_int_or("time_step_rank", (hidden + 15) / 16)));
  } else {
    const Mamba2Sizes s = mamba2_sizes(c);
    w.add_u32(p + "ssm.inner_size", uint32_t(s.inner));
    w.add_u32(p + "ssm.time_step_rank", uint32_t(s.heads));
    w.add_u32(p + "ssm.group_count", uint32_t(s.groups));
  }
  w.add_f32(p + "attention.layer_norm_rms_epsilon", float(c.get_float_or("layer_norm_epsilon", 1e-5)));
  if (arch == "mamba") w.add_bool(p + "ssm.dt_b_c_rms", hf_class == "FalconMambaForCausalLM");
}

std::vector<TensorPlan> plan_ssm(const ModelFiles& files, const Config& c, const std::string& arch, bool tied) {
  const bool m2 = arch == "mamba2";
  const Mamba2Sizes s = m2 ? mamba2_sizes(c) : Mamba2Sizes{};
  std::vector<TensorPlan> plans;
  for (const std::string& name : files.names()) {
    if (name == "lm_head.weight" && tied) continue;
    const auto gguf_name = gguf_hybrid_tensor_name(arch, name);
    if (!gguf_name) throw LoadError(files.source(name) + ": tensor '" + name + "' has no GGUF counterpart for " + arch);
    TensorPlan p;
    p.gguf_name = *gguf_name;
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
    } else if (m2 && !edited && name.ends_with(".mixer.norm.weight")) {
      if (numel != s.inner)
        throw LoadError(files.source(name) + ": tensor '" + name + "': expected " + std::to_string(s.inner) +
                        " values (expand * hidden_size)");
      p.shape = {s.groups, s.inner / s.groups};
      p.type = QuantType::F32;
    }
    plans.push_back(std::move(p));
  }
  return plans;
}

}  // namespace attnzoo
