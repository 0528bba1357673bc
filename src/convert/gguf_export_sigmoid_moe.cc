#include "convert/gguf_export_sigmoid_moe.h"

#include <set>
#include <string_view>

#include "loader/load_error.h"

namespace attnzoo {

int64_t count_mtp_blocks(const ModelFiles& files, const Config& c) {
  constexpr std::string_view kLayers = "model.layers.";
  const int64_t layers = c.get_int("num_hidden_layers");
  std::set<int64_t> extra;
  for (const std::string& name : files.names()) {
    if (!name.starts_with(kLayers)) continue;
    const size_t dot = name.find('.', kLayers.size());
    const std::string index = name.substr(kLayers.size(), dot == std::string::npos ? 0 : dot - kLayers.size());
    if (index.empty() || index.size() > 9 || index.find_first_not_of("0123456789") != std::string::npos) continue;
    if (const int64_t i = std::stoll(index); i >= layers) extra.insert(i);
  }
  return int64_t(extra.size());
}

void add_sigmoid_moe_hparams(GgufWriter& w, const Config& c, const std::string& arch, int64_t rotary_dim,
                             int64_t mtp_blocks) {
  const bool glm = arch == "glm4moe";
  if (!glm && arch != "minimax-m2") return;
  const std::string p = arch + ".";
  w.add_u32(p + "rope.dimension_count", uint32_t(rotary_dim));
  w.add_u32(p + "expert_count", uint32_t(c.get_int(glm ? "n_routed_experts" : "num_local_experts")));
  w.add_u32(p + "expert_used_count", uint32_t(c.get_int("num_experts_per_tok")));
  w.add_u32(p + "expert_feed_forward_length", uint32_t(c.get_int(glm ? "moe_intermediate_size" : "intermediate_size")));
  w.add_u32(p + "expert_gating_func", 2);  // sigmoid
  if (!glm) return;
  const int64_t groups = c.get_int_or("n_group", 1), kept = c.get_int_or("topk_group", 1);
  if (groups > 1 && kept < groups)
    throw LoadError(c.source() + ": keys 'n_group' / 'topk_group' (" + std::to_string(groups) + " / " +
                    std::to_string(kept) + "): GGUF (llama.cpp's glm4moe) routes over all experts, not the best "
                    "groups");
  w.add_u32(p + "expert_shared_count", uint32_t(c.get_int_or("n_shared_experts", 0)));
  w.add_u32(p + "leading_dense_block_count", uint32_t(c.get_int_or("first_k_dense_replace", 1)));
  w.add_f32(p + "expert_weights_scale", float(c.get_float_or("routed_scaling_factor", 1.0)));
  w.add_bool(p + "expert_weights_norm", c.get_bool_or("norm_topk_prob", true));
  if (mtp_blocks > 0) w.add_u32(p + "nextn_predict_layers", uint32_t(mtp_blocks));
}

}  // namespace attnzoo
