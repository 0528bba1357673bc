#pragma once
// A small random gpt-oss checkpoint (GptOssForCausalLM) with the GPU runner's head shape (head_dim 64) and every
// feature of the architecture: q / k / v / o biases, a sink logit per head, a sliding-window layer then a full one,
// YaRN RoPE, and the MoE with a biased router and transformers' fused experts (gate_up_proj [E, hidden, 2I] with
// gate / up columns interleaved, down_proj [E, I, hidden], both biased), clamped SwiGLU at `swiglu_limit`. 2 layers,
// hidden 128, 4 query heads over 2 KV heads, vocabulary kTinyDecoderVocab; bf16 or f32 tensors from a fixed seed,
// fan-in scaled. `chosen_bias` > 0 adds that much to the router bias of every expert e with e % 3 == 1 (1, 4, 7 of
// 8): with top_k their count, every token keeps those experts by a margin far past the router logits' spread (about
// 1), so no near-tie can flip a choice between the CPU's f32 logits and the GPU's, while the softmax among the kept
// ones still follows each token's logits and the experts between them stay idle.
#include <cmath>
#include <string>

#include "loader/test_files.h"
#include "testing/tiny_checkpoint.h"
#include "testing/tiny_decoder.h"

namespace attnzoo::testing {

struct TinyGptOss {
  std::string dtype = "BF16";  // or "F32"
  int64_t experts = 4;
  int64_t top_k = 4;
  float swiglu_limit = 7.f;
  float chosen_bias = 0.f;
  int64_t window = 8;
  uint32_t seed = 21;
};

inline void write_tiny_gpt_oss(const ScratchDir& dir, const TinyGptOss& t) {
  const int64_t V = kTinyDecoderVocab, H = 128, I = 64, D = 64, Q = 4 * D, KV = 2 * D, L = 2, E = t.experts;
  write_file(dir.path() / "config.json",
             R"({"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": 128,
  "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
  "head_dim": 64, "vocab_size": )" + std::to_string(V) + R"(, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5,
  "num_local_experts": )" + std::to_string(E) + R"(, "num_experts_per_tok": )" + std::to_string(t.top_k) +
                 R"(, "swiglu_limit": )" + std::to_string(t.swiglu_limit) + R"(, "sliding_window": )" +
                 std::to_string(t.window) + R"(,
  "layer_types": ["sliding_attention", "full_attention"],
  "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": false,
                   "original_max_position_embeddings": 64},
  "rope_theta": 150000.0, "tie_word_embeddings": false})");
  TinyTensorShapes shapes = {{"model.embed_tokens.weight", {V, H}}, {"model.norm.weight", {H}},
                             {"lm_head.weight", {V, H}}};
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l);
    for (auto [name, shape] : TinyTensorShapes{
             {".input_layernorm.weight", {H}}, {".post_attention_layernorm.weight", {H}},
             {".self_attn.q_proj.weight", {Q, H}}, {".self_attn.q_proj.bias", {Q}},
             {".self_attn.k_proj.weight", {KV, H}}, {".self_attn.k_proj.bias", {KV}},
             {".self_attn.v_proj.weight", {KV, H}}, {".self_attn.v_proj.bias", {KV}},
             {".self_attn.o_proj.weight", {H, Q}}, {".self_attn.o_proj.bias", {H}}, {".self_attn.sinks", {4}},
             {".mlp.router.weight", {E, H}}, {".mlp.router.bias", {E}},
             {".mlp.experts.gate_up_proj", {E, H, 2 * I}}, {".mlp.experts.gate_up_proj_bias", {E, 2 * I}},
             {".mlp.experts.down_proj", {E, I, H}}, {".mlp.experts.down_proj_bias", {E, H}}})
      shapes.emplace_back(p + name, shape);
  }
  write_tiny_tensors(dir, shapes, t.dtype, t.seed, [&, e = int64_t(0)](const std::string& name, const auto& shape,
                                                                       float r) mutable {
    if (name.find("norm") != std::string::npos) return 1.f + 0.1f * r;
    if (name.ends_with("router.bias")) {  // drawn in order: element e of the layer's [E]
      const float chosen = e % 3 == 1 ? t.chosen_bias : 0.f;
      e = (e + 1) % E;
      return chosen + 0.1f * r;
    }
    if (name.ends_with("sinks") || name.find("embed") != std::string::npos) return r;
    if (name.find("bias") != std::string::npos) return 0.1f * r;
    // The experts as x @ W: their fan-in is the middle dimension.
    if (name.find("experts") != std::string::npos) return r / std::sqrt(float(shape[1]));
    return (name == "lm_head.weight" ? 4.f / std::sqrt(float(H)) : 1.f / std::sqrt(float(shape.back()))) * r;
  });
}

}  // namespace attnzoo::testing
