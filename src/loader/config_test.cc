#include "loader/config.h"

#include <gtest/gtest.h>

#include "loader/test_files.h"

namespace attnzoo {
namespace {

// The shape of a real multimodal config: language settings under text_config, dtype only at the top.
const char* kConfig = R"({
  "architectures": ["Gemma3ForConditionalGeneration"],
  "model_type": "gemma3",
  "torch_dtype": "bfloat16",
  "tie_word_embeddings": true,
  "num_attention_heads": 8,
  "rope_theta": 10000.0,
  "rms_norm_eps": 1e-06,
  "head_dim": 2.0,
  "partial": 2.5,
  "sliding_window": null,
  "eos_token_id": [1, 106],
  "layer_types": ["sliding_attention", "full_attention"],
  "rope_scaling": {"rope_type": "linear", "factor": 8.0, "nested": {"deep": 3}},
  "text_config": {
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "rope_parameters": {"rope_theta": 1000000, "rope_type": "default"}
  }
})";

std::string error_of(const std::function<void()>& fn) { return testing::load_error_of(fn); }

TEST(Config, TypedGetters) {
  Config c = Config::parse(kConfig, "cfg.json");
  EXPECT_EQ(c.get_int("num_attention_heads"), 8);
  EXPECT_EQ(c.get_int("head_dim"), 2);  // 2.0 is an exact integer
  EXPECT_DOUBLE_EQ(c.get_float("rope_theta"), 10000.0);
  EXPECT_DOUBLE_EQ(c.get_float("rms_norm_eps"), 1e-6);
  EXPECT_DOUBLE_EQ(c.get_float("num_attention_heads"), 8.0);  // ints are numbers too
  EXPECT_TRUE(c.get_bool("tie_word_embeddings"));
  EXPECT_EQ(c.get_string("model_type"), "gemma3");
  EXPECT_EQ(c.get_int_list("eos_token_id"), (std::vector<int64_t>{1, 106}));
  EXPECT_EQ(c.get_float_list("eos_token_id"), (std::vector<double>{1, 106}));
  EXPECT_EQ(c.get_string_list("layer_types")[1], "full_attention");
  EXPECT_EQ(c.get_string_list("architectures")[0], "Gemma3ForConditionalGeneration");
}

TEST(Config, DefaultsAndNull) {
  Config c = Config::parse(kConfig, "cfg.json");
  EXPECT_EQ(c.get_int_or("num_key_value_heads", 8), 8);
  EXPECT_EQ(c.get_int_or("num_attention_heads", 99), 8);
  EXPECT_DOUBLE_EQ(c.get_float_or("missing", 0.5), 0.5);
  EXPECT_FALSE(c.get_bool_or("missing", false));
  EXPECT_EQ(c.get_string_or("missing", "x"), "x");
  EXPECT_FALSE(c.has("sliding_window"));  // null counts as absent
  EXPECT_EQ(c.get_int_or("sliding_window", -1), -1);
  EXPECT_TRUE(c.has("rope_scaling"));
  EXPECT_FALSE(c.has("nope"));
}

TEST(Config, DottedPathsAndSubConfigs) {
  Config c = Config::parse(kConfig, "cfg.json");
  EXPECT_DOUBLE_EQ(c.get_float("rope_scaling.factor"), 8.0);
  EXPECT_EQ(c.get_string("rope_scaling.rope_type"), "linear");
  EXPECT_EQ(c.get_int("rope_scaling.nested.deep"), 3);
  EXPECT_FALSE(c.has("rope_scaling.missing"));
  EXPECT_FALSE(c.has("model_type.x"));  // a string has no members
  Config rope = c.sub("rope_scaling");
  EXPECT_EQ(rope.get_int("nested.deep"), 3);
  std::string e = error_of([&] { rope.get_int("factorx"); });
  EXPECT_NE(e.find("'rope_scaling.factorx'"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { c.sub("model_type"); }).find("expected an object"), std::string::npos);
}

TEST(Config, TextConfig) {
  Config c = Config::parse(kConfig, "cfg.json");
  ASSERT_TRUE(c.has_text_config());
  Config t = c.text_config();
  EXPECT_EQ(t.get_int("num_attention_heads"), 16);
  EXPECT_EQ(t.get_int("rope_parameters.rope_theta"), 1000000);
  EXPECT_EQ(t.dtype(), "bfloat16");  // inherited from the top level
  std::string e = error_of([&] { t.get_int("hidden_size"); });
  EXPECT_NE(e.find("cfg.json"), std::string::npos) << e;
  EXPECT_NE(e.find("'text_config.hidden_size'"), std::string::npos) << e;
  EXPECT_NE(e.find("missing"), std::string::npos) << e;

  Config plain = Config::parse(R"({"num_attention_heads": 4})", "p.json");
  EXPECT_FALSE(plain.has_text_config());
  EXPECT_EQ(plain.text_config().get_int("num_attention_heads"), 4);
}

TEST(Config, DTypeKeys) {
  EXPECT_EQ(Config::parse(R"({"torch_dtype": "float16"})", "a").dtype(), "float16");
  EXPECT_EQ(Config::parse(R"({"dtype": "bfloat16", "torch_dtype": "float32"})", "a").dtype(), "bfloat16");
  EXPECT_EQ(Config::parse(R"({"dtype": "torch.float32"})", "a").dtype(), "float32");
  EXPECT_EQ(Config::parse(R"({})", "a").dtype(), "");
  EXPECT_EQ(Config::parse(R"({"torch_dtype": "bfloat16"})", "a").dtype_or(DType::f32), DType::bf16);
  EXPECT_EQ(Config::parse(R"({"dtype": "float16"})", "a").dtype_or(DType::f32), DType::f16);
  EXPECT_EQ(Config::parse(R"({})", "a").dtype_or(DType::f32), DType::f32);
  EXPECT_NE(error_of([] { Config::parse(R"({"dtype": "int8"})", "a").dtype_or(DType::f32); }).find("int8"),
            std::string::npos);
  EXPECT_NE(error_of([] { Config::parse(R"({"dtype": 3})", "a").dtype(); }).find("'dtype'"), std::string::npos);
}

TEST(Config, ErrorsNameFileAndKey) {
  Config c = Config::parse(kConfig, "/models/x/config.json");
  struct Case { std::function<void()> fn; const char* key; const char* fragment; };
  const Case cases[] = {
      {[&] { c.get_int("num_layers"); }, "'num_layers'", "missing"},
      {[&] { c.get_int("model_type"); }, "'model_type'", "found a JSON string"},
      {[&] { c.get_int("partial"); }, "'partial'", "2.5"},
      {[&] { c.get_int("sliding_window"); }, "'sliding_window'", "missing"},
      {[&] { c.get_float("model_type"); }, "'model_type'", "expected a number"},
      {[&] { c.get_bool("num_attention_heads"); }, "'num_attention_heads'", "true or false"},
      {[&] { c.get_string("rope_theta"); }, "'rope_theta'", "expected a string"},
      {[&] { c.get_int_list("layer_types"); }, "'layer_types'", "item 0"},
      {[&] { c.get_int_list("model_type"); }, "'model_type'", "list of integers"},
      {[&] { c.get_string_list("eos_token_id"); }, "'eos_token_id'", "list of strings"},
      {[&] { c.get_int_or("model_type", 1); }, "'model_type'", "expected an integer"},  // present but wrong
  };
  for (const Case& k : cases) {
    std::string e = error_of(k.fn);
    EXPECT_NE(e.find("/models/x/config.json"), std::string::npos) << e;
    EXPECT_NE(e.find(k.key), std::string::npos) << e;
    EXPECT_NE(e.find(k.fragment), std::string::npos) << e;
  }
}

TEST(Config, LoadFromFile) {
  testing::ScratchDir dir;
  const std::string path = (dir.path() / "config.json").string();
  testing::write_file(path, std::string(kConfig));
  EXPECT_EQ(Config::load(path).get_int("num_attention_heads"), 8);
  EXPECT_EQ(Config::load(path).source(), path);
  EXPECT_NE(error_of([&] { Config::load(path + ".missing"); }).find(path + ".missing"), std::string::npos);
  testing::write_file(path, std::string("{\"a\": 1,}"));
  std::string e = error_of([&] { Config::load(path); });
  EXPECT_NE(e.find(path), std::string::npos) << e;
  EXPECT_NE(e.find("byte 8"), std::string::npos) << e;
  testing::write_file(path, std::string("[1]"));
  EXPECT_NE(error_of([&] { Config::load(path); }).find("expected an object"), std::string::npos);
}

}  // namespace
}  // namespace attnzoo
