#pragma once
// What the tiny random checkpoints (tiny_llama.h, tiny_decoder.h, tiny_hybrid.h) share: the list of tensor names and
// shapes each one builds, and the writer that fills them with one normal draw per element, in list order, from a
// fixed seed, so a checkpoint's bytes depend only on its list, seed and dtype.
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "loader/test_files.h"

namespace attnzoo::testing {

using TinyTensorShapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;

// A model.layers.<l> block's two RMSNorms and SwiGLU MLP, in the order the hybrids draw them before their mixer's.
inline TinyTensorShapes tiny_norms_and_mlp_shapes(int64_t hidden, int64_t intermediate) {
  const int64_t H = hidden, I = intermediate;
  return {{".input_layernorm.weight", {H}},
          {".post_attention_layernorm.weight", {H}},
          {".mlp.gate_proj.weight", {I, H}},
          {".mlp.up_proj.weight", {I, H}},
          {".mlp.down_proj.weight", {H, I}}};
}

// `["a", "b"]`'s inside: config.json's layer_types.
inline std::string tiny_json_strings(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& x : items) out += (out.empty() ? "\"" : ", \"") + x + "\"";
  return out;
}

// Writes model.safetensors: `value(name, shape, r)` turns each element's draw r into its weight (norms near 1,
// fan-in scaled matrices, ...); dtype "F32" or "BF16".
template <typename Value>
void write_tiny_tensors(const ScratchDir& dir, const TinyTensorShapes& shapes, const std::string& dtype, uint32_t seed,
                        Value&& value) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<RawTensor> tensors;
  for (const auto& [name, shape] : shapes) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = value(name, shape, normal(rng));
    if (dtype == "F32") {
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
