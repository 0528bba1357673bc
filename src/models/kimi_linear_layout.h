#pragma once
// Kimi Linear's layer layout as models/kimi_linear.cc reads it from config.json, shared with attnzoo quantize
// (convert/gguf_export_kimi_linear.h), which must write the layers the builder would build.
#include <cstdint>
#include <vector>

#include "loader/config.h"

namespace attnzoo {

struct KimiLinearLayout {
  std::vector<bool> full_attention;  // per layer: an MLA layer, else Kimi Delta Attention
  std::vector<bool> sparse;          // per layer: the MoE, else the dense MLP (all dense without experts)
  int64_t num_experts = 0;
  int64_t kda_heads = 0, kda_head_dim = 0, conv_kernel = 0;  // not validated here
};

// Layer kinds from layer_types, else linear_attn_config's 1-indexed kda_layers / full_attn_layers; feed-forwards
// from mlp_layer_types, else first_k_dense_replace; the KDA sizes from linear_attn_config, else linear_*.
// LoadError naming the key at fault.
KimiLinearLayout read_kimi_linear_layout(const Config& c);

// A count under its Moonshot key, else transformers' alias, else `fallback`.
int64_t kimi_int(const Config& c, const char* key, const char* alias, int64_t fallback);

}  // namespace attnzoo
