#pragma once
// Small random hybrid checkpoints beside tiny_decoder.h's Llama family, with its sizes (hidden 128, vocabulary 97):
// - the Mamba-2 family in Mamba's layout (backbone.embeddings, backbone.layers.<i>.{norm, mixer}, backbone.norm_f,
//   lm_head): Mamba2ForCausalLM (every layer a Mamba-2 mixer), or NemotronHForCausalLM with a layer pattern of
//   Mamba-2 ("M"), NoPE attention ("*", head_dim 64) and relu² MLP ("-") layers. Mamba-2: 8 heads of 16 over 2
//   groups, state size 32, conv width 4; step sizes softplus(dt + dt_bias) around 0.1 and decays A = -exp(A_log)
//   in [-3, -1], so the state carries tokens well past one chunk.
// - Qwen3NextForCausalLM with Gated DeltaNet layers only ("linear_attention": 2 key heads, 4 value heads, head dims
//   64, conv width 4; the fused in_proj_qkvz / in_proj_ba of Qwen3-Next) and a dense SwiGLU MLP after each, or with
//   gated full attention at given layers.
// - Lfm2ForCausalLM: gated short convolutions ("conv", L = 3) and attention with per-head q / k RMSNorm
//   ("full_attention", head_dim 64), a SwiGLU feed-forward (w1 / w3 / w2) in every block.
// - the Mamba-1 family in the same layout: MambaForCausalLM or FalconMambaForCausalLM (its weightless RMSNorms of
//   dt, B and C), inner 256, state size 16, dt_rank 8, conv width 4, step sizes and decays as Mamba-2's.
// - JambaForCausalLM: four layers, Mamba-1 mixers (weighted dt / B / C norms) but for NoPE attention at layer 2
//   (2 query heads of 64 over one KV head), a 4-expert top-2 SparseMoe at the odd layers, dense SwiGLUs else.
// - FalconH1ForCausalLM: attention (4 heads of 64 over 2 KV heads) beside Mamba-2 (8 heads of 16 over 2 groups, conv
//   width 4, the gated RMSNorm after the gate) in every layer, a SwiGLU feed-forward, every muP multiplier away
//   from 1 (the muP vector over in_proj's sections included).
// - KimiLinearForCausalLM of Kimi Delta Attention layers only (2 heads of 64, conv width 4; its MLA layers have no
//   CUDA block yet) with dense SwiGLU MLPs; the MLA sizes config.json must state anyway.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "loader/test_files.h"
#include "testing/tiny_checkpoint.h"
#include "testing/tiny_decoder.h"

namespace attnzoo::testing {

// The hybrids' weights by name: norms (and the SSMs' skip D) near 1, decays A = -exp(A_log) in [-3, -1], step-size
// biases around softplus(-2.3) ~ 0.1, conv taps scaled by the width, unit embeddings, an lm_head sharp enough for
// the logits to rank, every other matrix scaled by its fan-in. A family with its own rule for a name checks it first.
inline float tiny_hybrid_weight(const std::string& name, const std::vector<int64_t>& shape, float r,
                                int64_t conv_width, int64_t hidden) {
  const float fan_in = float(shape.size() > 1 ? shape[1] : 1);
  if (name.ends_with("norm.weight") || name.ends_with("norm_f.weight") || name.ends_with(".D")) return 1.f + 0.1f * r;
  if (name.ends_with("A_log")) return std::log(1.f + std::min(2.f, std::fabs(r)));
  if (name.ends_with("dt_bias") || name.ends_with(".dt_proj.bias")) return -2.3f + 0.5f * r;
  if (name.ends_with("conv1d.weight")) return r / std::sqrt(float(conv_width));
  if (name.ends_with("conv1d.bias")) return 0.1f * r;
  if (name.ends_with("embeddings.weight") || name.ends_with("embed_tokens.weight")) return r;
  if (name == "lm_head.weight") return 4.f * r / std::sqrt(float(hidden));
  return r / std::sqrt(fan_in);
}

// A Mamba-1 mixer's tensors (inner E, state N, dt rank R, conv width W), in the order both its families draw them.
inline TinyTensorShapes tiny_mamba_mixer_shapes(int64_t hidden, int64_t E, int64_t N, int64_t R, int64_t W) {
  return {{".in_proj.weight", {2 * E, hidden}}, {".conv1d.weight", {E, 1, W}}, {".conv1d.bias", {E}},
          {".x_proj.weight", {R + 2 * N, E}},   {".dt_proj.weight", {E, R}},   {".dt_proj.bias", {E}},
          {".A_log", {E, N}},                   {".D", {E}},                   {".out_proj.weight", {hidden, E}}};
}

// A Mamba-2 mixer's tensors (NH heads of P over G groups, state N, conv width W): in_proj yields the gate z, the
// convolved x / B / C and one dt per head.
inline TinyTensorShapes tiny_mamba2_mixer_shapes(int64_t hidden, int64_t NH, int64_t P, int64_t G, int64_t N,
                                                 int64_t W) {
  const int64_t E = NH * P, CD = E + 2 * G * N, PD = E + CD + NH;
  return {{".in_proj.weight", {PD, hidden}}, {".conv1d.weight", {CD, 1, W}}, {".conv1d.bias", {CD}},
          {".dt_bias", {NH}},                {".A_log", {NH}},               {".D", {NH}},
          {".norm.weight", {E}},             {".out_proj.weight", {hidden, E}}};
}

struct TinyHybrid {
  std::string architecture = "Mamba2ForCausalLM";  // or "NemotronHForCausalLM"
  std::string pattern = "MM";                      // Nemotron-H's hybrid_override_pattern; Mamba-2: one M per layer
  std::string dtype = "BF16";                      // or "F32"
  int64_t state_size = 32;
  uint32_t seed = 21;
};

inline void write_tiny_hybrid(const ScratchDir& dir, const TinyHybrid& t) {
  const int64_t V = kTinyDecoderVocab, H = 128, I = 256, L = int64_t(t.pattern.size());
  const int64_t NH = 8, P = 16, G = 2, N = t.state_size, W = 4;
  const int64_t D = 64, Q = 4 * D, KV = 2 * D;
  const bool nemotron = t.architecture == "NemotronHForCausalLM";
  const std::string common = "\"hidden_size\": 128, \"num_hidden_layers\": " + std::to_string(L) +
                             ", \"vocab_size\": 97, \"layer_norm_epsilon\": 1e-5, \"tie_word_embeddings\": false, "
                             "\"conv_kernel\": 4, \"n_groups\": 2, ";
  if (nemotron)
    write_file(dir.path() / "config.json",
               "{\"architectures\": [\"NemotronHForCausalLM\"], \"model_type\": \"nemotron_h\", " + common +
                   "\"hybrid_override_pattern\": \"" + t.pattern +
                   "\", \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 64, "
                   "\"intermediate_size\": 256, \"mamba_num_heads\": 8, \"mamba_head_dim\": 16, \"ssm_state_size\": " +
                   std::to_string(N) + ", \"max_position_embeddings\": 4096, \"mlp_hidden_act\": \"relu2\"}");
  else
    write_file(dir.path() / "config.json",
               "{\"architectures\": [\"Mamba2ForCausalLM\"], \"model_type\": \"mamba2\", " + common +
                   "\"num_heads\": 8, \"head_dim\": 16, \"state_size\": " + std::to_string(N) + "}");

  TinyTensorShapes shapes = {
      {"backbone.embeddings.weight", {V, H}}, {"backbone.norm_f.weight", {H}}, {"lm_head.weight", {V, H}}};
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "backbone.layers." + std::to_string(l);
    shapes.push_back({p + ".norm.weight", {H}});
    const char kind = t.pattern[size_t(l)];
    TinyTensorShapes mixer;
    if (kind == 'M')
      mixer = tiny_mamba2_mixer_shapes(H, NH, P, G, N, W);
    else if (kind == '*')
      mixer = {{".q_proj.weight", {Q, H}}, {".k_proj.weight", {KV, H}}, {".v_proj.weight", {KV, H}},
               {".o_proj.weight", {H, Q}}};
    else
      mixer = {{".up_proj.weight", {I, H}}, {".down_proj.weight", {H, I}}};
    for (auto& [name, shape] : mixer) shapes.push_back({p + ".mixer" + name, shape});
  }

  write_tiny_tensors(dir, shapes, t.dtype, t.seed, [&](const std::string& name, const auto& shape, float r) {
    return tiny_hybrid_weight(name, shape, r, W, H);
  });
}

struct TinyMamba {
  std::string architecture = "MambaForCausalLM";  // or "FalconMambaForCausalLM"
  int64_t layers = 2;
  std::string dtype = "BF16";  // or "F32"
  int64_t state_size = 16;
  uint32_t seed = 23;
};

inline void write_tiny_mamba(const ScratchDir& dir, const TinyMamba& t) {
  const int64_t V = kTinyDecoderVocab, H = 128, E = 256, N = t.state_size, R = 8, W = 4;
  write_file(dir.path() / "config.json",
             "{\"architectures\": [\"" + t.architecture + "\"], \"hidden_size\": 128, \"num_hidden_layers\": " +
                 std::to_string(t.layers) +
                 ", \"vocab_size\": 97, \"intermediate_size\": 256, \"state_size\": " + std::to_string(N) +
                 ", \"time_step_rank\": 8, \"conv_kernel\": 4, \"layer_norm_epsilon\": 1e-5, "
                 "\"mixer_rms_eps\": 1e-6, \"use_bias\": false, \"use_conv_bias\": true, "
                 "\"tie_word_embeddings\": false}");
  TinyTensorShapes shapes = {
      {"backbone.embeddings.weight", {V, H}}, {"backbone.norm_f.weight", {H}}, {"lm_head.weight", {V, H}}};
  for (int64_t l = 0; l < t.layers; ++l) {
    const std::string p = "backbone.layers." + std::to_string(l);
    shapes.push_back({p + ".norm.weight", {H}});
    for (auto& [name, shape] : tiny_mamba_mixer_shapes(H, E, N, R, W)) shapes.push_back({p + ".mixer" + name, shape});
  }
  write_tiny_tensors(dir, shapes, t.dtype, t.seed, [&](const std::string& name, const auto& shape, float r) {
    return tiny_hybrid_weight(name, shape, r, W, H);
  });
}

struct TinyJamba {
  std::string dtype = "BF16";
  uint32_t seed = 25;
};

inline void write_tiny_jamba(const ScratchDir& dir, const TinyJamba& t) {
  const int64_t V = kTinyDecoderVocab, H = 128, I = 256, L = 4, X = 4, E = 256, N = 16, R = 8, W = 4, D = 64;
  write_file(dir.path() / "config.json",
             R"({"architectures": ["JambaForCausalLM"], "model_type": "jamba", "hidden_size": 128,
  "num_hidden_layers": 4, "vocab_size": 97, "num_attention_heads": 2, "num_key_value_heads": 1,
  "intermediate_size": 256, "num_experts": 4, "num_experts_per_tok": 2, "attn_layer_period": 4,
  "attn_layer_offset": 2, "expert_layer_period": 2, "expert_layer_offset": 1, "mamba_expand": 2,
  "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_dt_rank": 8, "rms_norm_eps": 1e-6,
  "max_position_embeddings": 4096, "tie_word_embeddings": false})");
  TinyTensorShapes shapes = {
      {"model.embed_tokens.weight", {V, H}}, {"model.final_layernorm.weight", {H}}, {"lm_head.weight", {V, H}}};
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l);
    TinyTensorShapes parts = {{".input_layernorm.weight", {H}}, {".pre_ff_layernorm.weight", {H}}};
    if (l == 2)
      parts.insert(parts.end(), {{".self_attn.q_proj.weight", {2 * D, H}},
                                 {".self_attn.k_proj.weight", {D, H}},
                                 {".self_attn.v_proj.weight", {D, H}},
                                 {".self_attn.o_proj.weight", {H, 2 * D}}});
    else {
      TinyTensorShapes mamba = tiny_mamba_mixer_shapes(H, E, N, R, W);
      mamba.insert(mamba.end(),
                   {{".dt_layernorm.weight", {R}}, {".b_layernorm.weight", {N}}, {".c_layernorm.weight", {N}}});
      for (auto& [name, shape] : mamba) parts.push_back({".mamba" + name, shape});
    }
    std::vector<std::string> mlps;
    if (l % 2 == 1) {
      parts.push_back({".feed_forward.router.weight", {X, H}});
      for (int64_t e = 0; e < X; ++e) mlps.push_back(".feed_forward.experts." + std::to_string(e));
    } else {
      mlps.push_back(".feed_forward");
    }
    for (const std::string& m : mlps)
      parts.insert(parts.end(), {{m + ".gate_proj.weight", {I, H}},
                                 {m + ".up_proj.weight", {I, H}},
                                 {m + ".down_proj.weight", {H, I}}});
    for (auto& [name, shape] : parts) shapes.push_back({p + name, shape});
  }
  write_tiny_tensors(dir, shapes, t.dtype, t.seed, [&](const std::string& name, const auto& shape, float r) {
    return tiny_hybrid_weight(name, shape, r, W, H);
  });
}

struct TinyQwen3Next {
  std::vector<std::string> layer_types = {"linear_attention", "linear_attention"};
  std::string dtype = "BF16";
  uint32_t seed = 31;
};

inline void write_tiny_qwen3_next(const ScratchDir& dir, const TinyQwen3Next& t) {
  const int64_t V = kTinyDecoderVocab, H = 128, I = 256, L = int64_t(t.layer_types.size());
  const int64_t HK = 2, HV = 4, K = 64, VD = 64, kd = HK * K, vd = HV * VD, C = 2 * kd + vd, W = 4;
  const int64_t D = 64, Q = 4 * D, KV = 2 * D;
  const std::string types = tiny_json_strings(t.layer_types);
  write_file(dir.path() / "config.json",
             R"({"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "hidden_size": 128,
  "num_hidden_layers": )" + std::to_string(L) + R"(, "vocab_size": 97, "num_attention_heads": 4, "num_key_value_heads": 2,
  "head_dim": 64, "intermediate_size": 256, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
  "linear_key_head_dim": 64, "linear_value_head_dim": 64, "linear_conv_kernel_dim": 4, "num_experts": 0,
  "layer_types": [)" + types + R"(], "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "partial_rotary_factor": 0.25,
  "max_position_embeddings": 4096, "tie_word_embeddings": false})");
  TinyTensorShapes shapes = {
      {"model.embed_tokens.weight", {V, H}}, {"model.norm.weight", {H}}, {"lm_head.weight", {V, H}}};
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l);
    TinyTensorShapes parts = tiny_norms_and_mlp_shapes(H, I);
    if (t.layer_types[size_t(l)] == "linear_attention") {
      for (auto [name, shape] : TinyTensorShapes{
               {".linear_attn.in_proj_qkvz.weight", {C + vd, H}}, {".linear_attn.in_proj_ba.weight", {2 * HV, H}},
               {".linear_attn.conv1d.weight", {C, 1, W}},         {".linear_attn.A_log", {HV}},
               {".linear_attn.dt_bias", {HV}},                    {".linear_attn.norm.weight", {VD}},
               {".linear_attn.out_proj.weight", {H, vd}}})
        parts.emplace_back(name, shape);
    } else {  // q_proj: each head's query and output gate
      for (auto [name, shape] : TinyTensorShapes{
               {".self_attn.q_proj.weight", {2 * Q, H}}, {".self_attn.k_proj.weight", {KV, H}},
               {".self_attn.v_proj.weight", {KV, H}},    {".self_attn.o_proj.weight", {H, Q}},
               {".self_attn.q_norm.weight", {D}},        {".self_attn.k_norm.weight", {D}}})
        parts.emplace_back(name, shape);
    }
    for (auto& [name, shape] : parts) shapes.push_back({p + name, shape});
  }
  write_tiny_tensors(dir, shapes, t.dtype, t.seed, [&](const std::string& name, const auto& shape, float r) {
    if (name.ends_with("linear_attn.norm.weight")) return 1.f + 0.1f * r;                    // applied as w
    if (name.ends_with("norm.weight") || name.ends_with("layernorm.weight")) return 0.1f * r;  // applied as 1 + w
    return tiny_hybrid_weight(name, shape, r, W, H);
  });
}

struct TinyLfm2 {
  std::vector<std::string> layer_types = {"conv", "full_attention", "conv"};
  std::string dtype = "BF16";
  uint32_t seed = 41;
};

inline void write_tiny_lfm2(const ScratchDir& dir, const TinyLfm2& t) {
  const int64_t V = kTinyDecoderVocab, H = 128, I = 256, L = int64_t(t.layer_types.size()), W = 3;
  const int64_t D = 64, Q = 4 * D, KV = 2 * D;
  const std::string types = tiny_json_strings(t.layer_types);
  write_file(dir.path() / "config.json",
             R"({"architectures": ["Lfm2ForCausalLM"], "model_type": "lfm2", "hidden_size": 128, "num_hidden_layers": )" +
                 std::to_string(L) + R"(, "vocab_size": 97, "num_attention_heads": 4, "num_key_value_heads": 2,
  "head_dim": 64, "layer_types": [)" + types + R"(], "conv_L_cache": 3, "norm_eps": 1e-5, "rope_theta": 10000.0,
  "max_position_embeddings": 4096, "tie_embedding": false})");
  TinyTensorShapes shapes = {
      {"model.embed_tokens.weight", {V, H}}, {"model.embedding_norm.weight", {H}}, {"lm_head.weight", {V, H}}};
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l);
    TinyTensorShapes parts = {
        {".operator_norm.weight", {H}},           {".ffn_norm.weight", {H}}, {".feed_forward.w1.weight", {I, H}},
        {".feed_forward.w3.weight", {I, H}},      {".feed_forward.w2.weight", {H, I}}};
    if (t.layer_types[size_t(l)] == "conv") {
      for (auto [name, shape] : TinyTensorShapes{
               {".conv.in_proj.weight", {3 * H, H}},
               {".conv.conv.weight", {H, 1, W}},
               {".conv.out_proj.weight", {H, H}}})
        parts.emplace_back(name, shape);
    } else {
      for (auto [name, shape] : TinyTensorShapes{
               {".self_attn.q_proj.weight", {Q, H}},       {".self_attn.k_proj.weight", {KV, H}},
               {".self_attn.v_proj.weight", {KV, H}},      {".self_attn.out_proj.weight", {H, Q}},
               {".self_attn.q_layernorm.weight", {D}},     {".self_attn.k_layernorm.weight", {D}}})
        parts.emplace_back(name, shape);
    }
    for (auto& [name, shape] : parts) shapes.push_back({p + name, shape});
  }
  write_tiny_tensors(dir, shapes, t.dtype, t.seed, [&](const std::string& name, const auto& shape, float r) {
    if (name.ends_with("conv.conv.weight")) return r / std::sqrt(float(W));
    return tiny_hybrid_weight(name, shape, r, W, H);
  });
}

struct TinyFalconH1 {
  int64_t layers = 2;
  int64_t state_size = 32;  // Falcon-H1's own checkpoints have 256
  bool down_bias = false;    // a feed_forward.down_proj.bias (mlp_bias)
  std::string dtype = "BF16";
  uint32_t seed = 61;
  bool tied = false;  // no lm_head.weight: the head is the token table (lm_head_multiplier cannot fold into it)
};

inline void write_tiny_falcon_h1(const ScratchDir& dir, const TinyFalconH1& t) {
  const int64_t V = kTinyDecoderVocab, H = 128, I = 256, L = t.layers;
  const int64_t NH = 8, P = 16, G = 2, N = t.state_size, W = 4;
  const int64_t D = 64, Q = 4 * D, KV = 2 * D;
  write_file(dir.path() / "config.json",
             R"({"architectures": ["FalconH1ForCausalLM"], "model_type": "falcon_h1", "hidden_size": 128,
  "num_hidden_layers": )" + std::to_string(L) + R"(, "vocab_size": 97, "intermediate_size": 256,
  "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
  "max_position_embeddings": 4096, "tie_word_embeddings": )" + std::string(t.tied ? "true" : "false") + R"(,
  "mamba_d_ssm": 128, "mamba_n_heads": 8,
  "mamba_d_head": 16, "mamba_n_groups": 2, "mamba_d_state": )" + std::to_string(N) + R"(, "mamba_d_conv": 4,
  "mamba_rms_norm": true, "mamba_norm_before_gate": false, "embedding_multiplier": 1.5, "lm_head_multiplier": 0.75,
  "attention_in_multiplier": 0.8, "attention_out_multiplier": 1.25, "key_multiplier": 0.6,
  "ssm_in_multiplier": 1.2, "ssm_out_multiplier": 0.9, "ssm_multipliers": [0.9, 1.1, 1.2, 0.8, 1.3],
  "mlp_multipliers": [1.2, 0.7]})");
  TinyTensorShapes shapes = {{"model.embed_tokens.weight", {V, H}}, {"model.final_layernorm.weight", {H}}};
  if (!t.tied) shapes.push_back({"lm_head.weight", {V, H}});
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l);
    for (auto& [name, shape] : TinyTensorShapes{
             {".input_layernorm.weight", {H}},        {".pre_ff_layernorm.weight", {H}},
             {".self_attn.q_proj.weight", {Q, H}},    {".self_attn.k_proj.weight", {KV, H}},
             {".self_attn.v_proj.weight", {KV, H}},   {".self_attn.o_proj.weight", {H, Q}}})
      shapes.push_back({p + name, shape});
    for (auto& [name, shape] : tiny_mamba2_mixer_shapes(H, NH, P, G, N, W))
      shapes.push_back({p + ".mamba" + name, shape});
    for (auto& [name, shape] : TinyTensorShapes{{".feed_forward.gate_proj.weight", {I, H}},
                                                {".feed_forward.up_proj.weight", {I, H}},
                                                {".feed_forward.down_proj.weight", {H, I}}})
      shapes.push_back({p + name, shape});
    if (t.down_bias) shapes.push_back({p + ".feed_forward.down_proj.bias", {H}});
  }
  write_tiny_tensors(dir, shapes, t.dtype, t.seed, [&](const std::string& name, const auto& shape, float r) {
    if (name.ends_with("down_proj.bias")) return 0.1f * r;
    return tiny_hybrid_weight(name, shape, r, W, H);
  });
}

struct TinyKimiLinear {
  std::string dtype = "BF16";
  uint32_t seed = 51;
};

inline void write_tiny_kimi_linear(const ScratchDir& dir, const TinyKimiLinear& t) {
  const int64_t V = kTinyDecoderVocab, H = 128, I = 256, L = 2, NH = 2, K = 64, D = NH * K, W = 4;
  write_file(dir.path() / "config.json",
             R"({"architectures": ["KimiLinearForCausalLM"], "model_type": "kimi_linear", "hidden_size": 128,
  "num_hidden_layers": 2, "vocab_size": 97, "num_attention_heads": 4, "num_key_value_heads": 4,
  "kv_lora_rank": 32, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 32, "intermediate_size": 256,
  "layer_types": ["linear_attention", "linear_attention"], "linear_num_heads": 2, "linear_head_dim": 64,
  "linear_conv_kernel_dim": 4, "num_experts": 0, "rms_norm_eps": 1e-5, "hidden_act": "silu",
  "max_position_embeddings": 4096, "tie_word_embeddings": false})");
  TinyTensorShapes shapes = {
      {"model.embed_tokens.weight", {V, H}}, {"model.norm.weight", {H}}, {"lm_head.weight", {V, H}}};
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l);
    TinyTensorShapes parts = tiny_norms_and_mlp_shapes(H, I);
    for (auto [name, shape] : TinyTensorShapes{
             {".self_attn.q_proj.weight", {D, H}},      {".self_attn.k_proj.weight", {D, H}},
             {".self_attn.v_proj.weight", {D, H}},      {".self_attn.q_conv1d.weight", {D, 1, W}},
             {".self_attn.k_conv1d.weight", {D, 1, W}}, {".self_attn.v_conv1d.weight", {D, 1, W}},
             {".self_attn.f_a_proj.weight", {K, H}},    {".self_attn.f_b_proj.weight", {D, K}},
             {".self_attn.A_log", {1, 1, NH, 1}},       {".self_attn.dt_bias", {D}},
             {".self_attn.b_proj.weight", {NH, H}},     {".self_attn.g_a_proj.weight", {K, H}},
             {".self_attn.g_b_proj.weight", {D, K}},    {".self_attn.o_norm.weight", {K}},
             {".self_attn.o_proj.weight", {H, D}}})
      parts.emplace_back(name, shape);
    for (auto& [name, shape] : parts) shapes.push_back({p + name, shape});
  }
  write_tiny_tensors(dir, shapes, t.dtype, t.seed, [&](const std::string& name, const auto& shape, float r) {
    return tiny_hybrid_weight(name, shape, r, W, H);
  });
}

}  // namespace attnzoo::testing
