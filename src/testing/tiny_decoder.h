#pragma once
// A small random Llama-family checkpoint with the GPU runner's head shape (head_dim 64): Llama, or Qwen3 with its
// per-head q / k norms, or Qwen2 with q / k / v biases; bf16 or f32 tensors; extra config.json keys for the
// features a test switches on. 2 layers, hidden 128, 4 query heads over 2 KV heads, vocabulary 97; normal draws
// from a fixed seed, fan-in scaled, so greedy ties are practically impossible.
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "loader/test_files.h"

namespace attnzoo::testing {

struct TinyDecoder {
  std::string architecture = "LlamaForCausalLM";
  std::string model_type = "llama";
  std::string dtype = "BF16";  // or "F32"
  bool qk_norm = false;        // Qwen3
  bool qkv_bias = false;       // Qwen2
  bool tied = false;           // no lm_head.weight: the head is the embedding table (tie_word_embeddings)
  std::string extra_config;    // more keys, each followed by a comma: "\"sliding_window\": 8, "
  int64_t head_dim = 64;
  uint32_t seed = 11;
};

inline constexpr int64_t kTinyDecoderVocab = 97;

inline void write_tiny_decoder(const ScratchDir& dir, const TinyDecoder& t) {
  const int64_t V = kTinyDecoderVocab, H = 128, I = 256, D = t.head_dim, Q = 4 * D, KV = 2 * D, L = 2;
  write_file(dir.path() / "config.json",
             R"({"architectures": [")" + t.architecture + R"("], "model_type": ")" + t.model_type + R"(", )" +
                 t.extra_config + R"("hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
  "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": )" + std::to_string(D) + R"(, "vocab_size": 97,
  "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": )" +
                 (t.tied ? "true" : "false") + "}");
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {{"model.embed_tokens.weight", {V, H}},
                                                                      {"model.norm.weight", {H}}};
  if (!t.tied) shapes.push_back({"lm_head.weight", {V, H}});
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l);
    for (auto [name, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
             {".input_layernorm.weight", {H}}, {".post_attention_layernorm.weight", {H}},
             {".self_attn.q_proj.weight", {Q, H}}, {".self_attn.k_proj.weight", {KV, H}},
             {".self_attn.v_proj.weight", {KV, H}}, {".self_attn.o_proj.weight", {H, Q}},
             {".mlp.gate_proj.weight", {I, H}}, {".mlp.up_proj.weight", {I, H}}, {".mlp.down_proj.weight", {H, I}}})
      shapes.emplace_back(p + name, shape);
    if (t.qk_norm) {
      shapes.push_back({p + ".self_attn.q_norm.weight", {D}});
      shapes.push_back({p + ".self_attn.k_norm.weight", {D}});
    }
    if (t.qkv_bias)
      for (auto [proj, rows] : {std::pair{"q", Q}, {"k", KV}, {"v", KV}})
        shapes.push_back({p + ".self_attn." + proj + "_proj.bias", {rows}});
  }
  std::mt19937 rng(t.seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<RawTensor> tensors;
  for (const auto& [name, shape] : shapes) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    const bool norm = name.find("norm") != std::string::npos, bias = name.find("bias") != std::string::npos;
    const float scale = name == "lm_head.weight" ? 4.f / std::sqrt(float(H)) : 1.f / std::sqrt(float(shape.back()));
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v)
      x = norm ? 1.f + 0.1f * normal(rng)
               : bias ? 0.1f * normal(rng) : (name.find("embed") != std::string::npos ? normal(rng) : scale * normal(rng));
    if (t.dtype == "F32") {
      tensors.push_back(raw_tensor(name, "F32", shape, v));
    } else {
      std::vector<uint16_t> b(v.size());
      for (size_t i = 0; i < v.size(); ++i) b[i] = f32_to_bf16(v[i]);
      tensors.push_back(raw_tensor(name, "BF16", shape, b));
    }
  }
  write_file(dir.path() / "model.safetensors", safetensors_bytes(tensors));
}

}  // namespace attnzoo::testing
