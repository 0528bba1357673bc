#include "convert/gguf_export_qwen3_hybrid.h"

#include <optional>
#include <string_view>
#include <utility>

#include "convert/gguf_export_hybrids.h"
#include "core/checked.h"
#include "loader/gguf_hybrids.h"
#include "loader/load_error.h"
#include "models/decoder.h"

namespace attnzoo {
namespace {

// mlp.experts.E.{gate,up,down}_proj.weight, each stacked over E into ffn_{gate,up,down}_exps
const ExpertTensors kExperts{"mlp", {{"gate_proj", "ffn_gate_exps"}, {"up_proj", "ffn_up_exps"},
                                     {"down_proj", "ffn_down_exps"}}};

struct LinearShape {
  int64_t nk, dk, nv, dv;
};

LinearShape linear_shape(const Config& c) {
  LinearShape s{c.get_int("linear_num_key_heads"), c.get_int("linear_key_head_dim"),
                c.get_int("linear_num_value_heads"), c.get_int("linear_value_head_dim")};
  if (s.nk <= 0 || s.dk <= 0 || s.nv <= 0 || s.dv <= 0 || s.nv % s.nk != 0)
    throw LoadError(c.source() + ": keys 'linear_num_key_heads' / 'linear_num_value_heads' / 'linear_*_head_dim': "
                    "must be positive, the value heads a multiple of the key heads");
  return s;
}

// in_proj_qkvz's rows: [q (dk), k (dk), v (vz), z (vz)] for each key head, vz = nv / nk * dv.
std::pair<std::vector<int64_t>, std::vector<int64_t>> qkvz_rows(const LinearShape& s) {
  const int64_t vz = s.nv / s.nk * s.dv, per = 2 * s.dk + 2 * vz;
  std::vector<int64_t> qkv, z;
  auto part = [&](std::vector<int64_t>& out, int64_t offset, int64_t n) {
    for (int64_t h = 0; h < s.nk; ++h)
      for (int64_t r = 0; r < n; ++r) out.push_back(h * per + offset + r);
  };
  part(qkv, 0, s.dk);
  part(qkv, s.dk, s.dk);
  part(qkv, 2 * s.dk, vz);
  part(z, 2 * s.dk + vz, vz);
  return {qkv, z};
}

int64_t full_attention_interval(const Config& c) {
  const int64_t layers = c.get_int("num_hidden_layers");
  if (!c.has("layer_types")) return c.get_int_or("full_attention_interval", 4);
  const std::vector<std::string> types = c.get_string_list("layer_types");
  int64_t interval = 0;
  for (size_t i = 0; i < types.size() && !interval; ++i)
    if (types[i] == "full_attention") interval = int64_t(i) + 1;
  bool periodic = int64_t(types.size()) == layers && interval > 0;
  for (size_t i = 0; periodic && i < types.size(); ++i)
    periodic = types[i] == ((int64_t(i) + 1) % interval == 0 ? "full_attention" : "linear_attention");
  if (!periodic)
    throw LoadError(c.source() + ": key 'layer_types': qwen3next / qwen35 GGUF stores one full-attention layer every "
                    "full_attention_interval layers; this pattern has no such interval");
  return interval;
}

// Qwen3.5's value-head tiling of one linear-attention tensor (`rest`: its name after "model.layers.N."); none
// for the others. Rows of in_proj_qkv / conv1d past q and k, of in_proj_z (dv each) and of in_proj_b / a (one
// each); elements of A_log / dt_bias; out_proj's input columns.
ValueHeadTiling value_heads(const LinearShape& s, const std::string& rest) {
  ValueHeadTiling t{s.nk, s.nv / s.nk, s.dv, 0, false};
  if (rest == "linear_attn.in_proj_qkv.weight" || rest == "linear_attn.conv1d.weight") {
    t.first = 2 * s.nk * s.dk;
  } else if (rest == "linear_attn.in_proj_b.weight" || rest == "linear_attn.in_proj_a.weight") {
    t.head_size = 1;
  } else if (rest == "linear_attn.A_log" || rest == "linear_attn.dt_bias") {
    t.head_size = 1;
    t.columns = true;  // a vector: one row
  } else if (rest == "linear_attn.out_proj.weight") {
    t.columns = true;
  } else if (rest != "linear_attn.in_proj_z.weight") {
    return {};
  }
  return t;
}

}  // namespace

std::optional<Qwen3Hybrid> qwen3_hybrid_for_hf(const std::string& hf_class) {
  if (hf_class == "Qwen3NextForCausalLM") return Qwen3Hybrid::next;
  if (hf_class == "Qwen3_5ForCausalLM") return Qwen3Hybrid::dense35;
  if (hf_class == "Qwen3_5MoeForCausalLM") return Qwen3Hybrid::moe35;
  // The multimodal wrappers: ModelFiles exposes their language model under the text model's names.
  if (hf_class == "Qwen3_5ForConditionalGeneration") return Qwen3Hybrid::dense35;
  if (hf_class == "Qwen3_5MoeForConditionalGeneration") return Qwen3Hybrid::moe35;
  return std::nullopt;
}

const char* qwen3_hybrid_arch(Qwen3Hybrid v) {
  return v == Qwen3Hybrid::next ? "qwen3next" : v == Qwen3Hybrid::dense35 ? "qwen35" : "qwen35moe";
}

void add_qwen3_hybrid_hparams(GgufWriter& w, const Config& c, int64_t rotary_dim, Qwen3Hybrid v) {
  const std::string p = std::string(qwen3_hybrid_arch(v)) + ".";
  const LinearShape s = linear_shape(c);
  const bool moe = v != Qwen3Hybrid::dense35;
  if (moe && c.get_int_or("num_experts", 0) <= 0)
    throw LoadError(c.source() + ": key 'num_experts': " + qwen3_hybrid_arch(v) + " GGUF needs a MoE model "
                    "(llama.cpp refuses one without experts); this checkpoint has none");
  w.add_u32(p + "ssm.conv_kernel", uint32_t(c.get_int("linear_conv_kernel_dim")));
  w.add_u32(p + "ssm.state_size", uint32_t(s.dk));
  w.add_u32(p + "ssm.group_count", uint32_t(s.nk));
  w.add_u32(p + "ssm.time_step_rank", uint32_t(s.nv));
  w.add_u32(p + "ssm.inner_size", uint32_t(checked_mul(s.dv, s.nv, "linear_value_head_dim * linear_num_value_heads")));
  w.add_u32(p + "full_attention_interval", uint32_t(full_attention_interval(c)));
  w.add_u32(p + "rope.dimension_count", uint32_t(rotary_dim));
  if (v != Qwen3Hybrid::next) {
    // Qwen3.5's multimodal RoPE sections (the converter's default for a text config without mrope_section); for
    // text every section turns by the same position, so they change nothing a text model computes.
    std::vector<int32_t> sections = {11, 11, 10, 0};
    if (c.has("rope_parameters.mrope_section")) {
      const std::vector<int64_t> m = c.get_int_list("rope_parameters.mrope_section");
      if (m.size() > 4) throw LoadError(c.source() + ": key 'rope_parameters.mrope_section': more than 4 sections");
      sections.assign(4, 0);
      for (size_t i = 0; i < m.size(); ++i) sections[i] = int32_t(m[i]);
    }
    w.add_i32_array(p + "rope.dimension_sections", sections);
  }
  if (!moe) return;
  w.add_u32(p + "expert_count", uint32_t(c.get_int_or("num_experts", 0)));
  w.add_u32(p + "expert_used_count", uint32_t(c.get_int_or("num_experts_per_tok", 0)));
  w.add_u32(p + "expert_feed_forward_length", uint32_t(c.get_int("moe_intermediate_size")));
  w.add_u32(p + "expert_shared_feed_forward_length", uint32_t(c.get_int("shared_expert_intermediate_size")));
  if (!c.get_bool_or("norm_topk_prob", true))
    throw LoadError(c.source() + ": key 'norm_topk_prob': false cannot be written (llama.cpp's " +
                    qwen3_hybrid_arch(v) + " always renormalizes the top-k routing weights)");
}

std::vector<TensorPlan> plan_qwen3_hybrid(const ModelFiles& files, Qwen3Hybrid v) {
  const Config c = files.config().text_config();
  const char* arch = qwen3_hybrid_arch(v);
  const LinearShape s = linear_shape(c);
  const int64_t experts = c.get_int_or("num_experts", 0);
  const bool tied = config_ties_embeddings(files.config(), c, false);
  std::vector<TensorPlan> plans;
  std::vector<std::string> expert_names;
  for (const std::string& name : files.names()) {
    if (name.find("rotary_emb.") != std::string::npos) continue;  // buffers recomputed from the config
    if (name == "lm_head.weight" && tied) continue;
    if (v != Qwen3Hybrid::next && name.starts_with("mtp.")) continue;  // the prediction blocks, not the text model
    const StoredTensor st = files.stored(name);
    const auto [blk, rest] = split_block_name(name);
    TensorPlan p;
    p.sources = {name};
    p.shape = st.shape;
    if (rest == "mlp.experts.gate_up_proj" || rest == "mlp.experts.down_proj") {
      // Qwen3.5-MoE's fused experts: [experts, 2 * moe_intermediate, hidden] (gate rows, then up rows) and
      // [experts, hidden, moe_intermediate], already stacked.
      if (st.shape.size() != 3 || st.shape[0] != experts)
        throw LoadError(files.source(name) + ": tensor '" + name + "': expected [num_experts (" +
                        std::to_string(experts) + "), rows, columns]");
      if (rest.ends_with("down_proj")) {
        p.gguf_name = blk + "ffn_down_exps.weight";
        plans.push_back(std::move(p));
        continue;
      }
      const int64_t inter = st.shape[1] / 2;
      if (st.shape[1] % 2 != 0)
        throw LoadError(files.source(name) + ": tensor '" + name + "': an odd row count cannot split into gate and up");
      for (const char* part : {"gate", "up"}) {
        TensorPlan half = p;
        half.gguf_name = blk + "ffn_" + part + "_exps.weight";
        half.shape = {experts, inter, st.shape[2]};
        const int64_t offset = std::string_view(part) == "up" ? inter : 0;
        for (int64_t e = 0; e < experts; ++e)
          for (int64_t r = 0; r < inter; ++r) half.rows.push_back(e * 2 * inter + offset + r);
        plans.push_back(std::move(half));
      }
      continue;
    }
    if (expert_tensor_layer(name, kExperts)) {  // stacked after the loop
      expert_names.push_back(name);
      continue;
    }
    if (v == Qwen3Hybrid::next && rest == "linear_attn.in_proj_qkvz.weight") {
      auto [qkv, z] = qkvz_rows(s);
      const int64_t want = checked_add(int64_t(qkv.size()), int64_t(z.size()), "in_proj_qkvz rows");
      if (st.shape.size() != 2 || st.shape[0] != want)
        throw LoadError(files.source(name) + ": tensor '" + name + "': expected " + std::to_string(want) +
                        " rows (2 * linear_num_key_heads * linear_key_head_dim + 2 * value dimension)");
      TensorPlan gate = p;
      p.gguf_name = blk + "attn_qkv.weight";
      p.shape = {int64_t(qkv.size()), st.shape[1]};
      p.rows = std::move(qkv);
      gate.gguf_name = blk + "attn_gate.weight";
      gate.shape = {int64_t(z.size()), st.shape[1]};
      gate.rows = std::move(z);
      plans.push_back(std::move(p));
      plans.push_back(std::move(gate));
      continue;
    }
    const auto gguf_name = gguf_hybrid_tensor_name(arch, name);
    if (!gguf_name)
      throw LoadError(files.source(name) + ": tensor '" + name + "' has no GGUF counterpart for " + arch);
    p.gguf_name = *gguf_name;
    if (plan_ssm_edit(files, name, p)) {  // A and the conv kernels, edited and held F32
    } else if (name.ends_with(".mlp.gate.weight") || name.ends_with(".mlp.shared_expert_gate.weight")) {
      p.type = QuantType::F32;  // the routers
    } else if (name.ends_with("norm.weight") && !name.ends_with(".linear_attn.norm.weight")) {
      p.edit = ValueEdit::plus_one;
    }
    if (v != Qwen3Hybrid::next) p.value_heads = value_heads(s, rest);
    plans.push_back(std::move(p));
  }
  std::vector<TensorPlan> stacked = plan_stacked_experts(files, expert_names, experts, kExperts);
  plans.insert(plans.end(), stacked.begin(), stacked.end());
  return plans;
}

}  // namespace attnzoo
