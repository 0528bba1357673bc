#include "loader/gguf_sigmoid_moe.h"

namespace attnzoo {

int64_t gguf_mtp_blocks(const GgufFile& f, const std::string& arch) {
  if (arch != "glm4moe" || !f.has(arch + ".nextn_predict_layers")) return 0;
  const gguf_hf::Meta m{f, arch + "."};
  const int64_t n = f.get_int(arch + ".nextn_predict_layers"), blocks = m.layers();
  if (n < 0 || n >= blocks)
    throw LoadError(f.path() + ": key '" + arch + ".nextn_predict_layers': " + std::to_string(n) +
                    " must be >= 0 and leave a decoder block of the " + std::to_string(blocks) + " ('" + arch +
                    ".block_count')");
  return n;
}

void add_sigmoid_moe_config(gguf_hf::JsonObject& c, const GgufFile& f, const std::string& arch) {
  const bool glm = arch == "glm4moe";
  if (!glm && arch != "minimax-m2") return;
  const gguf_hf::Meta m{f, arch + "."};
  // llama.cpp's graphs for both route with a sigmoid; a softmax file would be another model.
  if (m.has("expert_gating_func") && m.i("expert_gating_func") != 2)
    throw LoadError(f.path() + ": key '" + arch + ".expert_gating_func': " + std::to_string(m.i("expert_gating_func")) +
                    " is not 2 (sigmoid), the only gating " + arch + " has");
  const int64_t experts = m.count("expert_count", "num_experts");
  c.add_int(glm ? "n_routed_experts" : "num_local_experts", experts);
  c.add_int("num_experts_per_tok", m.bounded("expert_used_count", experts));
  if (!glm) {
    if (!m.has("feed_forward_length")) c.add_int("intermediate_size", m.positive("expert_feed_forward_length"));
    return;
  }
  c.add_int("moe_intermediate_size", m.positive("expert_feed_forward_length"));
  c.add_int("n_shared_experts", m.has("expert_shared_count") ? m.i("expert_shared_count") : 0);
  c.add_int("first_k_dense_replace", m.has("leading_dense_block_count") ? m.i("leading_dense_block_count") : 0);
  c.add_float("routed_scaling_factor", m.has("expert_weights_scale") ? m.d("expert_weights_scale") : 1.0);
  c.add_bool("norm_topk_prob", m.has("expert_weights_norm") && f.get_bool(arch + ".expert_weights_norm"));
  c.add_int("n_group", 1);  // llama.cpp's glm4moe graph routes over all experts at once
  c.add_int("topk_group", 1);
  c.add_int("num_nextn_predict_layers", gguf_mtp_blocks(f, arch));
  c.add_bool("attention_bias", gguf_hf::any_block_has(f, "attn_q.bias"));
  c.add_bool("use_qk_norm", gguf_hf::any_block_has(f, "attn_q_norm.weight"));
}

}  // namespace attnzoo
