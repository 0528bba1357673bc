// Config-only descriptions: every registered architecture has one, the layers and CacheSpecs match independent
// arithmetic from the config values, the comparisons stacks are right, and a built model reports the same.
#include "models/describe.h"

#include <gtest/gtest.h>


#include "loader/load_error.h"
#include "loader/test_files.h"
#include "models/registry.h"
#include "testing/tiny_llama.h"

namespace attnzoo {
namespace {

ModelDescription describe(const std::string& json, const LoadOptions& options = {}) {
  return describe_model(Config::parse(json, "config.json"), options);
}

std::string describe_error(const std::string& json) {
  try {
    describe(json);
  } catch (const LoadError& e) {
    return e.what();
  }
  return "";
}

TEST(Describe, EveryRegisteredArchitectureHasADescriber) {
  for (const std::string& arch : supported_architectures()) {
    EXPECT_NE(find_model_describer(arch), nullptr) << arch << " has a builder but no config-only describer";
  }
}

// Two KDA layers and one MLA layer (1-indexed lists, as the published config writes them).
constexpr const char* kKimi = R"({"architectures": ["KimiLinearForCausalLM"], "hidden_size": 32,
  "intermediate_size": 48, "moe_intermediate_size": 8, "num_hidden_layers": 3, "num_attention_heads": 4,
  "vocab_size": 50, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 6,
  "num_experts": 4, "num_experts_per_token": 2, "num_shared_experts": 1, "first_k_dense_replace": 1,
  "linear_attn_config": {"kda_layers": [1, 3], "full_attn_layers": [2], "num_heads": 2, "head_dim": 8,
                         "short_conv_kernel_size": 3}})";

TEST(Describe, KimiLinearLayersAndCaches) {
  const ModelDescription d = describe(kKimi);
  ASSERT_EQ(d.info.layers.size(), 3u);
  EXPECT_EQ(d.info.layers[0].kind, "linear_attention");
  EXPECT_EQ(d.info.layers[1].kind, "mla");
  EXPECT_EQ(d.info.layers[2].kind, "linear_attention");
  // MLA: one latent row of kv_lora_rank + qk_rope_head_dim f32 per token.
  EXPECT_EQ(d.info.layers[1].cache.bytes_per_token(), (16 + 4) * 4);
  EXPECT_EQ(d.info.layers[1].cache.fixed_bytes(), 0);
  // KDA: state [H, K, K] plus the q, k and v conv tails [3 * H * K, W - 1], f32.
  EXPECT_EQ(d.info.layers[0].cache.bytes_per_token(), 0);
  EXPECT_EQ(d.info.layers[0].cache.fixed_bytes(), (2 * 8 * 8 + 3 * 2 * 8 * 2) * 4);
  ASSERT_TRUE(d.mla.has_value());
  EXPECT_FALSE(d.attention.has_value());
  EXPECT_TRUE(d.parameters_estimated);

  // All-MLA: three latent layers; uncompressed: 4 heads of K 12 + V 6 f32 per token and layer.
  const auto mla = all_mla_stack(d);
  ASSERT_EQ(mla.size(), 3u);
  for (const auto& l : mla) EXPECT_EQ(l.cache.bytes_per_token(), 20 * 4);
  const auto mha = all_attention_stack(d);
  ASSERT_EQ(mha.size(), 3u);
  for (const auto& l : mha) {
    EXPECT_EQ(l.kind, "attention");
    EXPECT_EQ(l.cache.bytes_per_token(), 4 * (12 + 6) * 4);
    EXPECT_EQ(l.cache.fixed_bytes(), 0);
  }
}

TEST(Describe, Qwen3NextLayersAndCaches) {
  const ModelDescription d = describe(R"({"architectures": ["Qwen3NextForCausalLM"], "hidden_size": 32,
    "intermediate_size": 48, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 16, "vocab_size": 50, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
    "linear_key_head_dim": 8, "linear_value_head_dim": 6, "linear_conv_kernel_dim": 4,
    "full_attention_interval": 2, "partial_rotary_factor": 0.25})");
  ASSERT_EQ(d.info.layers.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const auto& l = d.info.layers[size_t(i)];
    if (i % 2 == 1) {
      EXPECT_EQ(l.kind, "attention");
      EXPECT_EQ(l.cache.bytes_per_token(), 2 * 2 * 16 * 4);  // K and V, 2 kv heads x 16
    } else {
      EXPECT_EQ(l.kind, "linear_attention");
      // state [HV, K, V] + conv tail over q, k (H * K each) and v (HV * V), W - 1 steps.
      EXPECT_EQ(l.cache.fixed_bytes(), (4 * 8 * 6 + ((2 * 2 * 8 + 4 * 6) * 3 + 15) / 16 * 16) * 4 /* conv tail padded to a cache line */);
    }
  }
  ASSERT_TRUE(d.attention.has_value());
  const auto all = all_attention_stack(d);
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].cache.bytes_per_token(), 2 * 2 * 16 * 4);
  EXPECT_TRUE(all_mla_stack(d).empty());
}

TEST(Describe, SlidingWindowsAndKvDtype) {
  LoadOptions o;
  o.pool.kv_dtype = DType::bf16;
  const ModelDescription d = describe(R"({"architectures": ["MistralForCausalLM"], "hidden_size": 16,
    "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 1,
    "vocab_size": 10, "sliding_window": 100})", o);
  for (const auto& l : d.info.layers) {
    EXPECT_EQ(l.kind, "sliding_attention");
    EXPECT_EQ(l.window, 100);
    EXPECT_EQ(l.cache.kind, CacheKind::kv_window);
    EXPECT_EQ(l.cache.window, 100);
    EXPECT_EQ(l.cache.bytes_per_token(), 2 * 1 * 4 * 2);  // K and V, one kv head of 4, bf16
  }
  // The all-attention stack drops the window.
  for (const auto& l : all_attention_stack(d)) EXPECT_EQ(l.cache.window, 0);
}

TEST(Describe, GemmaAlternatesSlidingAndGlobal) {
  const ModelDescription d = describe(R"({"architectures": ["Gemma2ForCausalLM"], "hidden_size": 16,
    "intermediate_size": 32, "num_hidden_layers": 4, "num_attention_heads": 2, "num_key_value_heads": 1,
    "head_dim": 8, "vocab_size": 10, "sliding_window": 32})");
  ASSERT_EQ(d.info.layers.size(), 4u);
  EXPECT_EQ(d.info.layers[0].kind, "sliding_attention");
  EXPECT_EQ(d.info.layers[1].kind, "attention");
  EXPECT_EQ(d.info.layers[0].window, 32);
  EXPECT_FALSE(d.parameters_estimated);
}

TEST(Describe, FalconH1ParallelLayers) {
  const ModelDescription d = describe(R"({"architectures": ["FalconH1ForCausalLM"], "hidden_size": 32,
    "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 8, "vocab_size": 10, "mamba_d_ssm": 64, "mamba_n_heads": 4, "mamba_d_head": 16,
    "mamba_n_groups": 2, "mamba_d_state": 8, "mamba_d_conv": 4})");
  for (const auto& l : d.info.layers) {
    EXPECT_EQ(l.kind, "attention+mamba2");
    EXPECT_EQ(l.cache.kind, CacheKind::kv_state);
    EXPECT_EQ(l.cache.bytes_per_token(), 2 * 2 * 8 * 4);
    // SSM state [H, P, N] + conv tail over x, B, C ([64 + 2 * 2 * 8], W - 1).
    EXPECT_EQ(l.cache.fixed_bytes(), (4 * 16 * 8 + (64 + 2 * 2 * 8) * 3) * 4);
  }
}

TEST(Describe, Lfm2ConvAndAttention) {
  const ModelDescription d = describe(R"({"architectures": ["Lfm2ForCausalLM"], "hidden_size": 16,
    "num_hidden_layers": 3, "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 10,
    "conv_L_cache": 3, "layer_types": ["conv", "full_attention", "conv"]})");
  ASSERT_EQ(d.info.layers.size(), 3u);
  EXPECT_EQ(d.info.layers[0].kind, "short_conv");
  EXPECT_EQ(d.info.layers[0].cache.fixed_bytes(), 16 * 2 * 4);
  EXPECT_EQ(d.info.layers[1].kind, "attention");
  EXPECT_EQ(d.info.layers[1].cache.bytes_per_token(), 2 * 1 * 8 * 4);
}

TEST(Describe, Mamba2HasOnlyState) {
  const ModelDescription d = describe(R"({"architectures": ["Mamba2ForCausalLM"], "hidden_size": 16,
    "num_hidden_layers": 2, "vocab_size": 10, "num_heads": 4, "head_dim": 8, "n_groups": 1, "state_size": 6,
    "conv_kernel": 4})");
  for (const auto& l : d.info.layers) {
    EXPECT_EQ(l.kind, "mamba2");
    EXPECT_EQ(l.cache.fixed_bytes(), (4 * 8 * 6 + ((32 + 2 * 6) * 3 + 15) / 16 * 16) * 4 /* conv tail padded to a cache line */);
  }
  EXPECT_TRUE(all_attention_stack(d).empty());
}

TEST(Describe, ErrorsNameTheProblem) {
  EXPECT_NE(describe_error(R"({"architectures": ["NopeForCausalLM"]})").find("'NopeForCausalLM' is not supported"),
            std::string::npos);
  EXPECT_NE(describe_error(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 8, "intermediate_size": 16,
    "num_attention_heads": 2, "vocab_size": 5})").find("num_hidden_layers"), std::string::npos);
  EXPECT_NE(describe_error(R"({"architectures": ["KimiLinearForCausalLM"], "hidden_size": 8, "num_hidden_layers": 2,
    "num_attention_heads": 2, "vocab_size": 5, "kv_lora_rank": 4, "qk_nope_head_dim": 2, "qk_rope_head_dim": 2,
    "v_head_dim": 2, "layer_types": ["full_attention", "mamba"]})").find("unknown or missing layer type 'mamba'"),
            std::string::npos);
  EXPECT_NE(describe_error(R"({"architectures": []})").find("architectures"), std::string::npos);
}

// A built one-layer Llama and its config alone report the same layers and parameter count.
TEST(Describe, MatchesTheBuiltModel) {
  testing::ScratchDir dir;
  const std::string config = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 8,
    "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
    "vocab_size": 5, "sliding_window": 6, "tie_word_embeddings": true})";
  testing::write_file(dir.path() / "config.json", config);
  const testing::TinyTensorShapes shapes = testing::one_layer_llama_shapes();
  std::vector<testing::RawTensor> tensors;
  for (const auto& [name, shape] : shapes) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    tensors.push_back(testing::raw_tensor(name, "F32", shape, std::vector<float>(size_t(n), 0.01f)));
  }
  testing::write_file(dir.path() / "model.safetensors", testing::safetensors_bytes(tensors));
  const auto model = Model::load(dir.path().string());
  const ModelDescription d = describe(config);
  const ModelInfo& built = model->info();
  ASSERT_EQ(d.info.layers.size(), built.layers.size());
  for (size_t l = 0; l < built.layers.size(); ++l) {
    EXPECT_EQ(d.info.layers[l].kind, built.layers[l].kind);
    EXPECT_EQ(d.info.layers[l].window, built.layers[l].window);
    EXPECT_EQ(d.info.layers[l].cache.kind, built.layers[l].cache.kind);
    EXPECT_EQ(d.info.layers[l].cache.bytes_per_token(), built.layers[l].cache.bytes_per_token());
    EXPECT_EQ(d.info.layers[l].cache.fixed_bytes(), built.layers[l].cache.fixed_bytes());
    EXPECT_EQ(d.info.layers[l].cache.dtype, built.layers[l].cache.dtype);
    EXPECT_EQ(d.info.layers[l].cache.state_floats, built.layers[l].cache.state_floats);
  }
  EXPECT_EQ(d.info.parameter_count, built.parameter_count);
  EXPECT_EQ(d.info.cache_bytes_for(100, 16), built.cache_bytes_for(100, 16));
}

}  // namespace
}  // namespace attnzoo
