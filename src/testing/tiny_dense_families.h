#pragma once
// Small random checkpoints of the dense families whose block forms differ from Llama's (tiny_decoder.h has the
// Llama family), each with the features it brings switched on and the GPU runner's head shape (head_dim 64):
//   Gemma 2   sandwich norms ((1 + w) weights), GELU-tanh MLP, a sliding layer then a global one (window 8),
//             attention and final logit softcaps, query_pre_attn_scalar
//   Gemma 3   as Gemma 2 without softcaps, per-head q / k norms, local / global RoPE bases per layer type
//   OLMo 2    no input norm, post-sublayer norms, q / k norms across all heads' row
//   Cohere    parallel blocks over mean-centred LayerNorms, a logits multiplier, tied embeddings
//   Granite   Granite 4.0's dense attention-only form (GraniteMoeHybrid with no Mamba layer and no experts):
//             embedding, attention, residual multipliers and logits scaling
//   Ministral 3  Llama's blocks with Llama 4's query temperature (a TinyDecoder: tiny_ministral3)
// 2 layers, hidden 128, 4 query heads over 2 KV heads (Cohere: 2 over 1), vocabulary 97, bf16; normal draws from a fixed seed,
// fan-in scaled (norm weights near their identity: 1 + small, or small for the (1 + w) form).
#include <cmath>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "loader/test_files.h"
#include "testing/tiny_checkpoint.h"
#include "testing/tiny_decoder.h"

namespace attnzoo::testing {

enum class DenseFamily { gemma2, gemma3, olmo2, cohere, granite };

inline const char* dense_family_name(DenseFamily f) {
  switch (f) {
    case DenseFamily::gemma2: return "Gemma2ForCausalLM";
    case DenseFamily::gemma3: return "Gemma3ForCausalLM";
    case DenseFamily::olmo2: return "Olmo2ForCausalLM";
    case DenseFamily::cohere: return "CohereForCausalLM";
    case DenseFamily::granite: return "GraniteMoeHybridForCausalLM";
  }
  return "";
}

inline void write_tiny_dense_family(const ScratchDir& dir, DenseFamily f, uint32_t seed = 11) {
  constexpr int64_t V = 97, H = 128, I = 256, D = 64, L = 2;
  // Cohere's head_dim is hidden / heads (its config has no head_dim key): 2 query heads over 1 KV head there.
  const int64_t heads = f == DenseFamily::cohere ? 2 : 4, Q = heads * D, KV = heads / 2 * D;
  const bool gemma = f == DenseFamily::gemma2 || f == DenseFamily::gemma3;
  std::string keys;  // family keys, each followed by a comma
  switch (f) {
    case DenseFamily::gemma2:
      keys = R"("model_type": "gemma2", "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 64,
  "attn_logit_softcapping": 50.0, "final_logit_softcapping": 10.0, "sliding_window": 8, "rope_theta": 10000.0, )";
      break;
    case DenseFamily::gemma3:
      keys = R"("model_type": "gemma3_text", "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 64,
  "sliding_window": 8, "sliding_window_pattern": 2, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, )";
      break;
    case DenseFamily::olmo2:
      keys = R"("model_type": "olmo2", "hidden_act": "silu", "rope_theta": 10000.0, "tie_word_embeddings": false, )";
      break;
    case DenseFamily::cohere:
      keys = R"("model_type": "cohere", "hidden_act": "silu", "layer_norm_eps": 1e-5, "logit_scale": 0.25,
  "rope_theta": 10000.0, "tie_word_embeddings": true, )";
      break;
    case DenseFamily::granite:
      keys = R"("model_type": "granitemoehybrid", "hidden_act": "silu", "layer_types": ["attention", "attention"],
  "num_local_experts": 0, "shared_intermediate_size": 256, "position_embedding_type": "rope", "rope_theta": 10000.0,
  "attention_multiplier": 0.015625, "embedding_multiplier": 12.0, "residual_multiplier": 0.22, "logits_scaling": 4.0,
  "mamba_n_heads": 4, "mamba_d_head": 64, "mamba_n_groups": 1, "mamba_d_state": 16, "mamba_d_conv": 4,
  "mamba_expand": 2, "tie_word_embeddings": true, )";
      break;
  }
  write_file(dir.path() / "config.json",
             std::string(R"({"architectures": [")") + dense_family_name(f) + R"("], )" + keys +
                 R"("hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": )" +
                 std::to_string(heads) + R"(, "num_key_value_heads": )" + std::to_string(heads / 2) +
                 R"(, "head_dim": 64, "vocab_size": 97, "max_position_embeddings": 4096, "rms_norm_eps": 1e-6})");

  TinyTensorShapes shapes = {{"model.embed_tokens.weight", {V, H}}, {"model.norm.weight", {H}}};
  if (f == DenseFamily::olmo2) shapes.push_back({"lm_head.weight", {V, H}});
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l), a = p + ".self_attn";
    for (auto [proj, rows, cols] : {std::tuple{".q_proj", Q, H}, {".k_proj", KV, H}, {".v_proj", KV, H},
                                    {".o_proj", H, Q}})
      shapes.push_back({a + proj + ".weight", {rows, cols}});
    TinyTensorShapes norms;
    if (gemma) norms = {{".input_layernorm", {H}}, {".post_attention_layernorm", {H}},
                        {".pre_feedforward_layernorm", {H}}, {".post_feedforward_layernorm", {H}}};
    if (f == DenseFamily::gemma3) norms.insert(norms.end(), {{".self_attn.q_norm", {D}}, {".self_attn.k_norm", {D}}});
    if (f == DenseFamily::olmo2)
      norms = {{".post_attention_layernorm", {H}}, {".post_feedforward_layernorm", {H}}, {".self_attn.q_norm", {Q}},
               {".self_attn.k_norm", {KV}}};
    if (f == DenseFamily::cohere) norms = {{".input_layernorm", {H}}};
    if (f == DenseFamily::granite) norms = {{".input_layernorm", {H}}, {".post_attention_layernorm", {H}}};
    for (const auto& [name, shape] : norms) shapes.push_back({p + name + ".weight", shape});
    if (f == DenseFamily::granite) {  // the gate and up halves fused in input_linear [2I, H]
      shapes.push_back({p + ".shared_mlp.input_linear.weight", {2 * I, H}});
      shapes.push_back({p + ".shared_mlp.output_linear.weight", {H, I}});
    } else {
      shapes.push_back({p + ".mlp.gate_proj.weight", {I, H}});
      shapes.push_back({p + ".mlp.up_proj.weight", {I, H}});
      shapes.push_back({p + ".mlp.down_proj.weight", {H, I}});
    }
  }

  write_tiny_tensors(dir, shapes, "BF16", seed, [&](const std::string& name, const auto& shape, float r) {
    if (name.find("norm") != std::string::npos) return (gemma ? 0.f : 1.f) + 0.1f * r;
    if (name.find("embed") != std::string::npos) return r;
    return (name == "lm_head.weight" ? 4.f / std::sqrt(float(H)) : 1.f / std::sqrt(float(shape.back()))) * r;
  });
}

// Ministral 3's text model: Llama's blocks with Llama 4's query temperature (a factor of up to ~2 over the test's
// positions: beta 0.5 over intervals of 16 tokens).
inline TinyDecoder tiny_ministral3(uint32_t seed = 11) {
  return TinyDecoder{.architecture = "Ministral3ForCausalLM", .model_type = "ministral3",
                     .extra_config = R"("rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
  "llama_4_scaling_beta": 0.5, "original_max_position_embeddings": 16}, )",
                     .seed = seed};
}

}  // namespace attnzoo::testing
