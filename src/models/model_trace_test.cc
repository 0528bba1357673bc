// Model::trace (the explainer's hook) on a one-layer Llama written to a scratch directory: shapes, the scale,
// that a trace is stateless and causal (a prefix's trace is the prefix of the trace), and errors.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "loader/test_files.h"
#include "models/model.h"

namespace attnzoo {
namespace {

constexpr const char* kConfig = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 8,
  "intermediate_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
  "vocab_size": 5, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": true})";

void write_model(const testing::ScratchDir& dir) {
  testing::write_file(dir.path() / "config.json", kConfig);
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {{"model.embed_tokens.weight", {5, 8}},
                                                                      {"model.norm.weight", {8}}};
  for (int l = 0; l < 2; ++l) {
    const std::string p = "model.layers." + std::to_string(l);
    for (auto [name, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
             {".input_layernorm.weight", {8}}, {".post_attention_layernorm.weight", {8}},
             {".self_attn.q_proj.weight", {8, 8}}, {".self_attn.k_proj.weight", {4, 8}},
             {".self_attn.v_proj.weight", {4, 8}}, {".self_attn.o_proj.weight", {8, 8}},
             {".mlp.gate_proj.weight", {16, 8}}, {".mlp.up_proj.weight", {16, 8}},
             {".mlp.down_proj.weight", {8, 16}}})
      shapes.emplace_back(p + name, shape);
  }
  std::vector<testing::RawTensor> tensors;
  int seed = 1;
  for (const auto& [name, shape] : shapes) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = 0.1f * float((i * 7 + seed) % 13) - 0.5f;
    ++seed;
    tensors.push_back(testing::raw_tensor(name, "F32", shape, v));
  }
  testing::write_file(dir.path() / "model.safetensors", testing::safetensors_bytes(tensors));
}

TEST(ModelTrace, ReturnsQueriesAndKeysPerLayer) {
  testing::ScratchDir dir;
  write_model(dir);
  const auto model = Model::load(dir.path().string());
  const std::vector<int32_t> ids = {1, 4, 2};
  const std::vector<LayerTrace> full = model->trace(ids);
  ASSERT_EQ(full.size(), 2u);
  for (const LayerTrace& t : full) {
    EXPECT_EQ(t.kind, "attention");
    EXPECT_EQ(t.num_heads, 2);
    EXPECT_EQ(t.num_kv_heads, 1);
    EXPECT_EQ(t.head_dim, 4);
    EXPECT_FLOAT_EQ(t.scale, 0.5f);
    EXPECT_EQ(t.q.size(), 3u * 2 * 4);
    EXPECT_EQ(t.k.size(), 3u * 1 * 4);
    EXPECT_TRUE(t.state_norms.empty());
  }
  // Stateless and causal: the trace of a prefix is the prefix of the trace, in every layer.
  const std::vector<LayerTrace> prefix = model->trace(std::span<const int32_t>(ids.data(), 2));
  for (size_t l = 0; l < 2; ++l) {
    for (size_t i = 0; i < prefix[l].q.size(); ++i) EXPECT_NEAR(prefix[l].q[i], full[l].q[i], 1e-5f) << l;
    for (size_t i = 0; i < prefix[l].k.size(); ++i) EXPECT_NEAR(prefix[l].k[i], full[l].k[i], 1e-5f) << l;
  }
  // Layer 1 sees layer 0's output, so its keys differ from layer 0's.
  float diff = 0;
  for (size_t i = 0; i < full[0].k.size(); ++i) diff += std::abs(full[0].k[i] - full[1].k[i]);
  EXPECT_GT(diff, 1e-3f);
}

TEST(ModelTrace, RejectsBadIdsAndCountsDecodeBytes) {
  testing::ScratchDir dir;
  write_model(dir);
  const auto model = Model::load(dir.path().string());
  EXPECT_THROW(model->trace(std::vector<int32_t>{}), ArgumentError);
  EXPECT_THROW(model->trace(std::vector<int32_t>{5}), ArgumentError);
  // Per layer q, k, v, o and the MLP, plus the tied lm_head (the embedding table), all f32.
  const uint64_t per_layer = 8 * 8 + 4 * 8 + 4 * 8 + 8 * 8 + 3 * 16 * 8;
  EXPECT_EQ(model->info().decode_weight_bytes, 4 * (2 * per_layer + 5 * 8));
}

}  // namespace
}  // namespace attnzoo
