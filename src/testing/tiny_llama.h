#pragma once
// A small random Llama checkpoint written to a scratch directory, for tests that need a real model with
// distinct, untied logits (greedy ties are practically impossible): 2 layers, hidden 32, 4 query heads over
// 2 KV heads, vocabulary 97. Weights are normal draws from a fixed seed.
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "loader/test_files.h"
#include "testing/tiny_checkpoint.h"

namespace attnzoo::testing {

inline constexpr int64_t kTinyLlamaVocab = 97;

// The tensors of the smallest Llama the loader tests write: one layer, hidden 8 (or `hidden`), intermediate twice
// that, 2 query heads over 1 KV head, vocabulary 5, embeddings tied (no lm_head).
inline TinyTensorShapes one_layer_llama_shapes(int64_t hidden = 8) {
  const int64_t h = hidden, kv = hidden / 2, inter = 2 * hidden;
  return {{"model.embed_tokens.weight", {5, h}},
          {"model.norm.weight", {h}},
          {"model.layers.0.input_layernorm.weight", {h}},
          {"model.layers.0.post_attention_layernorm.weight", {h}},
          {"model.layers.0.self_attn.q_proj.weight", {h, h}},
          {"model.layers.0.self_attn.k_proj.weight", {kv, h}},
          {"model.layers.0.self_attn.v_proj.weight", {kv, h}},
          {"model.layers.0.self_attn.o_proj.weight", {h, h}},
          {"model.layers.0.mlp.gate_proj.weight", {inter, h}},
          {"model.layers.0.mlp.up_proj.weight", {inter, h}},
          {"model.layers.0.mlp.down_proj.weight", {h, inter}}};
}

// `vocab`: another size stands for a checkpoint padded differently (a draft model's).
inline void write_tiny_llama(const ScratchDir& dir, uint32_t seed = 7, int64_t vocab = kTinyLlamaVocab) {
  const int64_t V = vocab, H = 32, I = 64, KV = 2 * 8, L = 2;
  write_file(dir.path() / "config.json",
             R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 32, "intermediate_size": 64,
  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": )" +
                 std::to_string(V) + R"(,
  "max_position_embeddings": 512, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": false})");
  TinyTensorShapes shapes = {
      {"model.embed_tokens.weight", {V, H}}, {"model.norm.weight", {H}}, {"lm_head.weight", {V, H}}};
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l);
    for (auto [name, shape] : TinyTensorShapes{
             {".input_layernorm.weight", {H}}, {".post_attention_layernorm.weight", {H}},
             {".self_attn.q_proj.weight", {H, H}}, {".self_attn.k_proj.weight", {KV, H}},
             {".self_attn.v_proj.weight", {KV, H}}, {".self_attn.o_proj.weight", {H, H}},
             {".mlp.gate_proj.weight", {I, H}}, {".mlp.up_proj.weight", {I, H}}, {".mlp.down_proj.weight", {H, I}}})
      shapes.emplace_back(p + name, shape);
  }
  write_tiny_tensors(dir, shapes, "F32", seed, [&](const std::string& name, const auto& shape, float r) {
    if (name.find("norm") != std::string::npos) return 1.f + 0.1f * r;
    if (name.find("embed") != std::string::npos) return r;
    // Fan-in scaling keeps activations O(1); the head is scaled up so the next token depends on the context.
    return (name == "lm_head.weight" ? 2.f / std::sqrt(float(H)) : 1.f / std::sqrt(float(shape.back()))) * r;
  });
}

}  // namespace attnzoo::testing
