#pragma once
// A small random MiniMax-Text-01 checkpoint (MiniMaxForCausalLM, models/minimax.cc) with the GPU runner's head shape
// (head_dim 64, or `head_dim`): lightning attention layers beside one softmax attention layer ("linear_attention",
// "full_attention", "linear_attention"), a top-2 of 4 Mixtral-style experts in every block, postnorm residuals with
// every alpha / beta away from 1. Hidden 128, 4 heads (2 KV heads in the softmax layer), vocabulary 97, bf16;
// normal draws from a fixed seed, fan-in scaled.
#include <cmath>
#include <string>

#include "loader/test_files.h"
#include "testing/tiny_checkpoint.h"
#include "testing/tiny_decoder.h"

namespace attnzoo::testing {

inline void write_tiny_minimax(const ScratchDir& dir, uint32_t seed = 11, int64_t head_dim = 64) {
  const int64_t V = kTinyDecoderVocab, H = 128, I = 64, D = head_dim, heads = 4, inner = heads * D, KV = 2 * D, E = 4;
  const std::vector<std::string> types = {"linear_attention", "full_attention", "linear_attention"};
  write_file(dir.path() / "config.json",
             R"({"architectures": ["MiniMaxForCausalLM"], "model_type": "minimax", "hidden_size": 128,
  "intermediate_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
  "head_dim": )" + std::to_string(D) + R"(, "vocab_size": 97, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
  "hidden_act": "silu", "num_local_experts": 4, "num_experts_per_tok": 2, "layer_types": [)" +
                 tiny_json_strings(types) + R"(], "full_attn_alpha_factor": 1.7, "full_attn_beta_factor": 0.8,
  "linear_attn_alpha_factor": 1.3, "linear_attn_beta_factor": 1.1, "mlp_alpha_factor": 1.5,
  "mlp_beta_factor": 0.9, "tie_word_embeddings": false})");
  TinyTensorShapes shapes = {{"model.embed_tokens.weight", {V, H}}, {"model.norm.weight", {H}},
                             {"lm_head.weight", {V, H}}};
  for (size_t l = 0; l < types.size(); ++l) {
    const std::string p = "model.layers." + std::to_string(l), a = p + ".self_attn", m = p + ".block_sparse_moe";
    shapes.push_back({p + ".input_layernorm.weight", {H}});
    shapes.push_back({p + ".post_attention_layernorm.weight", {H}});
    if (types[l] == "linear_attention") {
      shapes.push_back({a + ".qkv_proj.weight", {3 * inner, H}});
      shapes.push_back({a + ".output_gate.weight", {inner, H}});
      shapes.push_back({a + ".out_proj.weight", {H, inner}});
      shapes.push_back({a + ".norm.weight", {inner}});
    } else {
      shapes.push_back({a + ".q_proj.weight", {inner, H}});
      shapes.push_back({a + ".k_proj.weight", {KV, H}});
      shapes.push_back({a + ".v_proj.weight", {KV, H}});
      shapes.push_back({a + ".o_proj.weight", {H, inner}});
    }
    shapes.push_back({m + ".gate.weight", {E, H}});
    for (int64_t e = 0; e < E; ++e) {
      const std::string x = m + ".experts." + std::to_string(e);
      shapes.push_back({x + ".w1.weight", {I, H}});
      shapes.push_back({x + ".w3.weight", {I, H}});
      shapes.push_back({x + ".w2.weight", {H, I}});
    }
  }
  write_tiny_tensors(dir, shapes, "BF16", seed, [&](const std::string& name, const auto& shape, float r) {
    if (name.find("norm") != std::string::npos) return 1.f + 0.1f * r;
    if (name.find("embed") != std::string::npos) return r;
    return (name == "lm_head.weight" ? 4.f / std::sqrt(float(H)) : 1.f / std::sqrt(float(shape.back()))) * r;
  });
}

}  // namespace attnzoo::testing
