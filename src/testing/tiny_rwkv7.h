#pragma once
// A small random RWKV7ForCausalLM checkpoint in flash-linear-attention's layout (the one models/rwkv7.cc reads),
// with tiny_decoder.h's sizes: hidden 128 as 2 heads of 64 (RWKV-7's head size; other head counts and sizes on
// request), vocabulary 97, intermediate 256, three layers (layer 0 with its pre_norm and no value LoRA; the later
// ones mixing v towards layer 0's), LoRA ranks 16 / 16 / 8 / 16 (w, a, v, g). Values near what trained models
// hold: norms near 1, lerp coefficients in (0, 1), fan-in scaled matrices, w_lora's bias so decays spread from mild
// to strong.
#include <cmath>
#include <string>
#include <vector>

#include "loader/test_files.h"
#include "testing/tiny_checkpoint.h"
#include "testing/tiny_decoder.h"

namespace attnzoo::testing {

struct TinyRwkv7 {
  std::string dtype = "BF16";  // "F32" or "BF16"
  bool norm_bias = true;       // false: LayerNorms without bias (the group norm keeps its own)
  bool tied = false;
  uint32_t seed = 41;
  int64_t heads = 2, head_dim = 64;  // hidden = heads * head_dim
};

inline void write_tiny_rwkv7(const ScratchDir& dir, const TinyRwkv7& t) {
  const int64_t H = t.heads, K = t.head_dim, C = H * K;
  constexpr int64_t I = 256, L = 3, Vocab = kTinyDecoderVocab;
  constexpr int64_t rw = 16, ra = 16, rv = 8, rg = 16;
  write_file(dir.path() / "config.json",
             std::string(R"({"architectures": ["RWKV7ForCausalLM"], "model_type": "rwkv7", "vocab_size": )") +
                 std::to_string(Vocab) + ", \"hidden_size\": " + std::to_string(C) +
                 ", \"num_hidden_layers\": 3, \"head_dim\": " + std::to_string(K) + ", " +
                 R"("intermediate_size": 256, "norm_eps": 1e-5, "norm_first": true, "norm_bias": )" +
                 (t.norm_bias ? "true" : "false") + R"(, "tie_word_embeddings": )" + (t.tied ? "true" : "false") +
                 R"(, "decay_low_rank_dim": 16, "a_low_rank_dim": 16, "v_low_rank_dim": 8, )" +
                 R"("gate_low_rank_dim": 16, "torch_dtype": ")" + (t.dtype == "F32" ? "float32" : "bfloat16") +
                 "\"}");
  TinyTensorShapes shapes = {{"model.embeddings.weight", {Vocab, C}}};
  auto norm = [&](const std::string& name) {
    shapes.push_back({name + ".weight", {C}});
    if (t.norm_bias) shapes.push_back({name + ".bias", {C}});
  };
  auto lora = [&](const std::string& name, int64_t rank, int64_t out, bool bias) {
    shapes.push_back({name + ".lora.0.weight", {rank, C}});
    shapes.push_back({name + ".lora.2.weight", {out, rank}});
    if (bias) shapes.push_back({name + ".lora.2.bias", {out}});
  };
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l), a = p + ".attn", f = p + ".ffn";
    if (l == 0) norm(p + ".pre_norm");
    norm(p + ".attn_norm");
    for (const char* m : {".x_r", ".x_w", ".x_k", ".x_v", ".x_a", ".x_g"}) shapes.push_back({a + m, {1, 1, C}});
    shapes.push_back({a + ".k_k", {C}});
    shapes.push_back({a + ".k_a", {C}});
    shapes.push_back({a + ".r_k", {H, K}});
    for (const char* m : {".r_proj", ".k_proj", ".v_proj", ".o_proj"})
      shapes.push_back({a + m + std::string(".weight"), {C, C}});
    lora(a + ".w_lora", rw, C, true);
    lora(a + ".a_lora", ra, C, true);
    lora(a + ".g_lora", rg, C, false);
    if (l > 0) lora(a + ".v_lora", rv, C, true);
    shapes.push_back({a + ".g_norm.weight", {C}});
    shapes.push_back({a + ".g_norm.bias", {C}});
    norm(p + ".ffn_norm");
    shapes.push_back({f + ".x_k", {C}});
    shapes.push_back({f + ".key.weight", {I, C}});
    shapes.push_back({f + ".value.weight", {C, I}});
  }
  norm("model.norm");
  if (!t.tied) shapes.push_back({"lm_head.weight", {Vocab, C}});
  auto ends = [](const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
  };
  write_tiny_tensors(dir, shapes, t.dtype, t.seed, [&](const std::string& name, const std::vector<int64_t>& shape,
                                                       float r) {
    if (name == "model.embeddings.weight") return r;
    if (ends(name, "norm.weight")) return 1.f + 0.1f * r;
    if (ends(name, "norm.bias")) return 0.1f * r;
    const std::string tail = name.substr(name.rfind('.'));
    if (tail == ".x_r" || tail == ".x_w" || tail == ".x_k" || tail == ".x_v" || tail == ".x_a" || tail == ".x_g")
      return 1.f / (1.f + std::exp(-r));
    if (tail == ".k_k") return 0.85f + 0.1f * r;
    if (tail == ".k_a") return 1.f + 0.1f * r;
    if (tail == ".r_k") return 0.3f * r;
    if (ends(name, "w_lora.lora.2.bias")) return -1.f + 1.5f * r;  // sigmoid spread: decays mild to strong
    if (ends(name, ".bias")) return 0.3f * r;
    return r / std::sqrt(float(shape.back()));  // a matrix: fan-in scaled
  });
}

}  // namespace attnzoo::testing
