#pragma once
// A small random Llama-family checkpoint with the GPU runner's head shape (head_dim 64): Llama, or Qwen3 with its
// per-head q / k norms, or Qwen2 with q / k / v biases; bf16 or f32 tensors; extra config.json keys for the
// features a test switches on; tied embeddings. 2 layers, hidden 128, 4 query heads over 2 KV heads, vocabulary 97; normal draws
// from a fixed seed, fan-in scaled, so greedy ties are practically impossible. With fused (tiny_phi3), Phi-3's
// layout: self_attn.qkv_proj and mlp.gate_up_proj, each one tensor of the separate projections' rows. With moe_experts, the MLPs become
// mixtures of experts 64 wide: Qwen3-MoE's (every layer, mlp.gate + mlp.experts.N) or, with deepseek_moe, GLM-4.5's
// (layer 0 dense, layer 1 a DeepSeek-V3 MoE: two groups of moe_experts / 2, topk_group 2 when moe_top_k exceeds
// one group, else 1; a correction bias, routed scaling, one shared expert).
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "loader/test_files.h"
#include "testing/tiny_checkpoint.h"

namespace attnzoo::testing {

struct TinyDecoder {
  std::string architecture = "LlamaForCausalLM";
  std::string model_type = "llama";
  std::string dtype = "BF16";  // or "F32"
  bool qk_norm = false;        // Qwen3
  bool qkv_bias = false;       // Qwen2
  std::string extra_config;    // more keys, each followed by a comma: "\"sliding_window\": 8, "
  int64_t head_dim = 64;
  uint32_t seed = 11;
  bool tied = false;  // no lm_head.weight: the head reads the embedding table (tie_word_embeddings)
  int64_t moe_experts = 0;  // > 0: MoE feed-forwards of this many experts
  int64_t moe_top_k = 2;
  bool deepseek_moe = false;
  int64_t mla_kv_lora_rank = 0;  // > 0: MLA attention
  int64_t mla_q_lora_rank = 64;  // 0: a plain q_proj
  bool fused = false;            // Phi-3's qkv_proj and gate_up_proj
};

inline constexpr int64_t kTinyDecoderVocab = 97;

inline void write_tiny_decoder(const ScratchDir& dir, const TinyDecoder& t) {
  const int64_t V = kTinyDecoderVocab, H = 128, I = 256, D = t.head_dim, Q = 4 * D, KV = 2 * D, L = 2;
  const int64_t E = t.moe_experts, MI = 64;
  std::string moe_config;
  if (E > 0 && t.deepseek_moe)
    moe_config = R"("n_routed_experts": )" + std::to_string(E) + R"(, "num_experts_per_tok": )" +
                 std::to_string(t.moe_top_k) + R"(, "moe_intermediate_size": 64, "n_group": 2, "topk_group": )" +
                 (t.moe_top_k > E / 2 ? "2" : "1") + R"(,
  "norm_topk_prob": true, "routed_scaling_factor": 2.5, "n_shared_experts": 1, "first_k_dense_replace": 1,
  "partial_rotary_factor": 1.0, )";
  else if (E > 0)
    moe_config = R"("num_experts": )" + std::to_string(E) + R"(, "num_experts_per_tok": )" +
                 std::to_string(t.moe_top_k) + R"(, "moe_intermediate_size": 64, "norm_topk_prob": true, )";
  const int64_t R = t.mla_kv_lora_rank, QR = t.mla_q_lora_rank, MD = 32;  // MD: each MLA head dim
  std::string mla_config;
  if (R > 0)
    mla_config = R"("kv_lora_rank": )" + std::to_string(R) + R"(, "qk_nope_head_dim": 32, "qk_rope_head_dim": 32,
  "v_head_dim": 32, )" + (QR > 0 ? R"("q_lora_rank": )" + std::to_string(QR) + ", " : std::string());
  write_file(dir.path() / "config.json",
             R"({"architectures": [")" + t.architecture + R"("], "model_type": ")" + t.model_type + R"(", )" +
                 t.extra_config + moe_config + mla_config + R"("hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
  "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": )" + std::to_string(D) + R"(, "vocab_size": 97,
  "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": )" +
                 (t.tied ? "true" : "false") + "}");
  TinyTensorShapes shapes = {{"model.embed_tokens.weight", {V, H}}, {"model.norm.weight", {H}}};
  if (!t.tied) shapes.push_back({"lm_head.weight", {V, H}});
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l);
    shapes.push_back({p + ".input_layernorm.weight", {H}});
    shapes.push_back({p + ".post_attention_layernorm.weight", {H}});
    if (R > 0) {
      const std::string a = p + ".self_attn";
      if (QR > 0) {
        shapes.push_back({a + ".q_a_proj.weight", {QR, H}});
        shapes.push_back({a + ".q_a_layernorm.weight", {QR}});
        shapes.push_back({a + ".q_b_proj.weight", {4 * 2 * MD, QR}});
      } else {
        shapes.push_back({a + ".q_proj.weight", {4 * 2 * MD, H}});
      }
      shapes.push_back({a + ".kv_a_proj_with_mqa.weight", {R + MD, H}});
      shapes.push_back({a + ".kv_a_layernorm.weight", {R}});
      shapes.push_back({a + ".kv_b_proj.weight", {4 * 2 * MD, R}});
      shapes.push_back({a + ".o_proj.weight", {H, 4 * MD}});
    } else if (t.fused) {
      shapes.push_back({p + ".self_attn.qkv_proj.weight", {Q + 2 * KV, H}});
      shapes.push_back({p + ".self_attn.o_proj.weight", {H, Q}});
    } else {
      for (auto [name, shape] : TinyTensorShapes{
               {".self_attn.q_proj.weight", {Q, H}}, {".self_attn.k_proj.weight", {KV, H}},
               {".self_attn.v_proj.weight", {KV, H}}, {".self_attn.o_proj.weight", {H, Q}}})
        shapes.emplace_back(p + name, shape);
    }
    auto mlp = [&](const std::string& m, int64_t width) {
      shapes.push_back({m + ".gate_proj.weight", {width, H}});
      shapes.push_back({m + ".up_proj.weight", {width, H}});
      shapes.push_back({m + ".down_proj.weight", {H, width}});
    };
    if (t.fused) {
      shapes.push_back({p + ".mlp.gate_up_proj.weight", {2 * I, H}});
      shapes.push_back({p + ".mlp.down_proj.weight", {H, I}});
    } else if (E == 0 || (t.deepseek_moe && l == 0)) {
      mlp(p + ".mlp", I);
    } else {
      shapes.push_back({p + ".mlp.gate.weight", {E, H}});
      for (int64_t e = 0; e < E; ++e) mlp(p + ".mlp.experts." + std::to_string(e), MI);
      if (t.deepseek_moe) {
        shapes.push_back({p + ".mlp.gate.e_score_correction_bias", {E}});
        mlp(p + ".mlp.shared_experts", MI);
      }
    }
    if (t.qk_norm) {
      shapes.push_back({p + ".self_attn.q_norm.weight", {D}});
      shapes.push_back({p + ".self_attn.k_norm.weight", {D}});
    }
    if (t.qkv_bias)
      for (auto [proj, rows] : {std::pair{"q", Q}, {"k", KV}, {"v", KV}})
        shapes.push_back({p + ".self_attn." + proj + "_proj.bias", {rows}});
  }
  write_tiny_tensors(dir, shapes, t.dtype, t.seed, [&](const std::string& name, const auto& shape, float r) {
    if (name.find("norm") != std::string::npos) return 1.f + 0.1f * r;
    if (name.find("bias") != std::string::npos) return 0.1f * r;
    if (name.find("embed") != std::string::npos) return r;
    return (name == "lm_head.weight" ? 4.f / std::sqrt(float(H)) : 1.f / std::sqrt(float(shape.back()))) * r;
  });
}

// Phi-3 / Phi-3.5 mini's head shape, head_dim 96 (4 query heads over 2 KV heads here; the published ones are MHA),
// fused projections, full rotary unless `extra_config` sets partial_rotary_factor.
inline TinyDecoder tiny_phi3(uint32_t seed = 11, std::string extra_config = "") {
  return TinyDecoder{.architecture = "Phi3ForCausalLM", .model_type = "phi3",
                     .extra_config = R"("hidden_act": "silu", )" + std::move(extra_config), .head_dim = 96,
                     .seed = seed, .fused = true};
}

}  // namespace attnzoo::testing
