#pragma once
// Small random Mamba-2 family checkpoints in Mamba's layout (backbone.embeddings, backbone.layers.<i>.{norm,
// mixer}, backbone.norm_f, lm_head), beside tiny_decoder.h's Llama family and with its sizes (hidden 128,
// vocabulary 97): Mamba2ForCausalLM (every layer a Mamba-2 mixer), or NemotronHForCausalLM with a layer pattern of
// Mamba-2 ("M"), NoPE attention ("*", head_dim 64) and relu² MLP ("-") layers. Mamba-2: 8 heads of 16 over 2
// groups, state size 32, conv width 4; step sizes softplus(dt + dt_bias) around 0.1 and decays A = -exp(A_log) in
// [-3, -1], so the state carries tokens well past one chunk.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "loader/test_files.h"
#include "testing/tiny_decoder.h"

namespace attnzoo::testing {

struct TinyHybrid {
  std::string architecture = "Mamba2ForCausalLM";  // or "NemotronHForCausalLM"
  std::string pattern = "MM";                      // Nemotron-H's hybrid_override_pattern; Mamba-2: one M per layer
  std::string dtype = "BF16";                      // or "F32"
  int64_t state_size = 32;
  uint32_t seed = 21;
};

inline void write_tiny_hybrid(const ScratchDir& dir, const TinyHybrid& t) {
  const int64_t V = kTinyDecoderVocab, H = 128, I = 256, L = int64_t(t.pattern.size());
  const int64_t NH = 8, P = 16, G = 2, N = t.state_size, W = 4, E = NH * P, CD = E + 2 * G * N, PD = E + CD + NH;
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

  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {
      {"backbone.embeddings.weight", {V, H}}, {"backbone.norm_f.weight", {H}}, {"lm_head.weight", {V, H}}};
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "backbone.layers." + std::to_string(l);
    shapes.push_back({p + ".norm.weight", {H}});
    const char kind = t.pattern[size_t(l)];
    std::vector<std::pair<std::string, std::vector<int64_t>>> mixer;
    if (kind == 'M')
      mixer = {{".in_proj.weight", {PD, H}}, {".conv1d.weight", {CD, 1, W}}, {".conv1d.bias", {CD}},
               {".dt_bias", {NH}},           {".A_log", {NH}},             {".D", {NH}},
               {".norm.weight", {E}},        {".out_proj.weight", {H, E}}};
    else if (kind == '*')
      mixer = {{".q_proj.weight", {Q, H}}, {".k_proj.weight", {KV, H}}, {".v_proj.weight", {KV, H}},
               {".o_proj.weight", {H, Q}}};
    else
      mixer = {{".up_proj.weight", {I, H}}, {".down_proj.weight", {H, I}}};
    for (auto& [name, shape] : mixer) shapes.push_back({p + ".mixer" + name, shape});
  }

  std::mt19937 rng(t.seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  auto ends = [](const std::string& s, const char* tail) {
    const std::string t2(tail);
    return s.size() >= t2.size() && s.compare(s.size() - t2.size(), t2.size(), t2) == 0;
  };
  std::vector<RawTensor> tensors;
  for (const auto& [name, shape] : shapes) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    const float fan_in = float(shape.size() > 1 ? shape[1] : 1);
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) {
      const float r = normal(rng);
      if (ends(name, "norm.weight") || ends(name, "norm_f.weight") || ends(name, ".D")) x = 1.f + 0.1f * r;
      else if (ends(name, ".A_log")) x = std::log(1.f + std::min(2.f, std::fabs(r)));
      else if (ends(name, ".dt_bias")) x = -2.3f + 0.5f * r;
      else if (ends(name, "conv1d.weight")) x = r / std::sqrt(float(W));
      else if (ends(name, "conv1d.bias")) x = 0.1f * r;
      else if (name == "backbone.embeddings.weight") x = r;
      else if (name == "lm_head.weight") x = 4.f * r / std::sqrt(float(H));
      else x = r / std::sqrt(fan_in);
    }
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
