// describe_rwkv7 (config-only inspect): layers and state sizes as the builder makes them, and the parameter
// estimate against counts of fla-layout state dicts (rwkv7_reference.py's model, which test_model_rwkv7.py checks
// against fla's declarations: 2248 and 2464 for the two configs below).
#include <gtest/gtest.h>

#include "loader/load_error.h"
#include "models/rwkv7_model.h"

namespace attnzoo {
namespace {

Config config(const std::string& extra, const std::string& head_dim = "4", const std::string& v_rank = "2") {
  return Config::parse(R"({"architectures": ["RWKV7ForCausalLM"], "model_type": "rwkv7", "vocab_size": 10,
    "hidden_size": 8, "num_hidden_layers": 2, "decay_low_rank_dim": 2, "a_low_rank_dim": 2,
    "gate_low_rank_dim": 2, "intermediate_size": null, "head_dim": )" + head_dim + R"(, "v_low_rank_dim": )" +
                           v_rank + extra + "}", "config.json");
}

TEST(Rwkv7Describe, LayersHoldAFixedStateAndParametersAreCounted) {
  const ModelDescription d = describe_rwkv7(config(""), {});
  ASSERT_EQ(d.info.layers.size(), 2u);
  for (const LayerInfo& l : d.info.layers) {
    EXPECT_EQ(l.kind, "rwkv7");
    EXPECT_EQ(l.cache.kind, CacheKind::state);
    EXPECT_EQ(l.cache.bytes_per_token(), 0);
    EXPECT_EQ(l.cache.fixed_bytes(), 4 * (8 + 2 * 4 * 4 + 8));  // attn shift, wkv [H, K, V], ffn shift
  }
  EXPECT_EQ(d.info.intermediate_size, 32);  // hidden_ratio 4, rounded up to 32
  EXPECT_TRUE(d.parameters_estimated);
  EXPECT_EQ(d.info.parameter_count, 2248);
}

TEST(Rwkv7Describe, WideValuesNoNormBiasTiedEmbeddings) {
  const ModelDescription d =
      describe_rwkv7(config(R"(, "norm_bias": false, "value_dim": [16, 16], "tie_word_embeddings": true)"), {});
  EXPECT_EQ(d.info.layers[1].cache.fixed_bytes(), 4 * (8 + 2 * 4 * 8 + 8));
  EXPECT_TRUE(d.info.tied_embeddings);
  EXPECT_EQ(d.info.parameter_count, 2464);
}

TEST(Rwkv7Describe, UnnamedRanksAreNotEstimatedAndBadConfigsAreNamed) {
  const ModelDescription d = describe_rwkv7(config("", "4", "null"), {});
  EXPECT_FALSE(d.parameters_estimated);
  EXPECT_EQ(d.info.layers.size(), 2u);
  for (const char* bad : {R"(, "attn": {"layers": [1], "num_heads": 2})", R"(, "hidden_act": "gelu")",
                          R"(, "value_dim": [16, 8])"})
    EXPECT_THROW(describe_rwkv7(config(bad), {}), LoadError) << bad;
  EXPECT_THROW(describe_rwkv7(config("", "3"), {}), LoadError);  // head_dim must divide hidden_size
}

}  // namespace
}  // namespace attnzoo
