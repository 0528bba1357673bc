#include "loader/config_limits.h"

#include <cmath>
#include <string_view>

#include "loader/load_error.h"

namespace attnzoo {
namespace {

// Counts and sizes: integers in [0, max]. The bounds sit far above every released model (the largest have
// ~128 layers, 128 heads, hidden sizes near 30k, vocabularies near 260k, 256 routed experts) and far below
// what makes the size formulas overflow or a loop over layers take minutes.
struct CountLimit {
  std::string_view key;
  int64_t max;
};
constexpr CountLimit kCounts[] = {
    {"num_hidden_layers", 4096},        {"num_layers", 4096},
    {"n_layer", 4096},                  {"num_attention_heads", 4096},
    {"num_key_value_heads", 4096},      {"n_head", 4096},
    {"head_dim", 65536},                {"hidden_size", int64_t(1) << 20},
    {"n_embd", int64_t(1) << 20},       {"d_model", int64_t(1) << 20},
    {"intermediate_size", int64_t(1) << 22},
    {"moe_intermediate_size", int64_t(1) << 22},
    {"vocab_size", int64_t(1) << 24},   {"max_position_embeddings", int64_t(1) << 30},
    {"n_routed_experts", 65536},        {"num_experts", 65536},
    {"num_local_experts", 65536},       {"num_experts_per_tok", 65536},
    {"n_shared_experts", 65536},        {"kv_lora_rank", 65536},
    {"q_lora_rank", 65536},             {"qk_nope_head_dim", 65536},
    {"qk_rope_head_dim", 65536},        {"v_head_dim", 65536},
    {"state_size", 65536},              {"d_state", 65536},
    {"conv_kernel", 4096},              {"d_conv", 4096},
    {"n_groups", 65536},                {"expand", 64},
    {"mamba_expand", 64},
    {"num_heads", 65536},               {"mamba_n_heads", 65536},
    {"linear_num_key_heads", 4096},     {"linear_num_value_heads", 4096},
    {"linear_key_head_dim", 65536},     {"linear_value_head_dim", 65536},
    {"sliding_window", int64_t(1) << 30},
    // The hybrids' own names for the same sizes.
    {"mamba_d_state", 65536},           {"mamba_d_conv", 4096},
    {"mamba_d_head", 65536},            {"mamba_n_groups", 65536},
    {"mamba_d_ssm", int64_t(1) << 22},  {"mamba_dt_rank", int64_t(1) << 20},
    {"time_step_rank", int64_t(1) << 20},
    {"linear_conv_kernel_dim", 4096},   {"short_conv_kernel_size", 4096},
    {"linear_num_heads", 4096},         {"linear_head_dim", 65536},
    {"value_dim", int64_t(1) << 22},    {"rotary_dim", 65536},
    {"shared_expert_intermediate_size", int64_t(1) << 22},
    {"moe_shared_expert_intermediate_size", int64_t(1) << 22},
    {"shared_intermediate_size", int64_t(1) << 22},
    {"n_group", 65536},                 {"topk_group", 65536},
    {"original_max_position_embeddings", int64_t(1) << 30},
};

// Epsilons under a square root: positive and finite (a negative one turns every norm into NaN).
constexpr std::string_view kEpsilons[] = {"rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_eps"};

void check_object(const json::Value& obj, const std::string& source, const std::string& prefix, int depth) {
  for (const json::Member& m : obj.as_object()) {
    const json::Value& v = m.second;
    auto fail = [&](const std::string& what) {
      throw LoadError(source + ": key '" + prefix + m.first + "': " + what);
    };
    if (v.is_object()) {
      if (depth < 8) check_object(v, source, prefix + m.first + ".", depth + 1);
      continue;
    }
    if (!v.is_number()) continue;  // null ("no sliding window") and other kinds are the getters' business
    for (const CountLimit& c : kCounts) {
      if (m.first != c.key) continue;
      if (!v.is_integer()) fail("expected an integer, got " + std::to_string(v.as_double()));
      if (v.as_int() < 0 || v.as_int() > c.max)
        fail("must be in [0, " + std::to_string(c.max) + "], got " + std::to_string(v.as_int()));
    }
    for (std::string_view e : kEpsilons)
      if (m.first == e && !(std::isfinite(v.as_double()) && v.as_double() > 0.0 && v.as_double() <= 1.0))
        fail("must be a positive number <= 1, got " + std::to_string(v.as_double()));
  }
}

}  // namespace

int64_t config_count_limit(std::string_view key) {
  for (const CountLimit& c : kCounts)
    if (c.key == key) return c.max;
  return -1;
}

void check_config_limits(const json::Value& root, const std::string& source) {
  if (root.is_object()) check_object(root, source, "", 0);
}

}  // namespace attnzoo
