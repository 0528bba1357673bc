#include "loader/model_dir.h"

#include <gtest/gtest.h>

#include <limits>

#include "loader/fp8_blocks.h"
#include "loader/test_files.h"

namespace attnzoo {
namespace {

using testing::raw_tensor;
using testing::safetensors_bytes;
using testing::ScratchDir;
using testing::write_file;

std::string error_of(const std::function<void()>& fn) { return testing::load_error_of(fn); }

void expect_contains(const std::string& s, std::initializer_list<std::string> parts) {
  for (const std::string& p : parts) EXPECT_NE(s.find(p), std::string::npos) << "missing '" << p << "' in: " << s;
}

const char* kConfig = R"({"num_attention_heads": 2, "torch_dtype": "float32"})";

// Two shards and their index, as transformers writes them.
void write_sharded(const ScratchDir& dir, const std::string& weight_map) {
  write_file(dir.path() / "config.json", std::string(kConfig));
  write_file(dir.path() / "model-00001-of-00002.safetensors",
             safetensors_bytes({raw_tensor("a", "F32", {2}, std::vector<float>{1, 2}),
                                raw_tensor("b", "F32", {1, 3}, std::vector<float>{3, 4, 5})}));
  write_file(dir.path() / "model-00002-of-00002.safetensors",
             safetensors_bytes({raw_tensor("c", "BF16", {2}, std::vector<uint16_t>{f32_to_bf16(6), f32_to_bf16(7)})}));
  write_file(dir.path() / "model.safetensors.index.json",
             "{\"metadata\": {\"total_size\": 24}, \"weight_map\": " + weight_map + "}");
}

const char* kWeightMap = R"({"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
                             "c": "model-00002-of-00002.safetensors"})";

TEST(ModelFiles, SingleFile) {
  ScratchDir dir;
  write_file(dir.path() / "config.json", std::string(kConfig));
  write_file(dir.path() / "model.safetensors",
             safetensors_bytes({raw_tensor("w", "F32", {2, 2}, std::vector<float>{1, 2, 3, 4}),
                                raw_tensor("v", "F32", {1}, std::vector<float>{9})}));
  ModelFiles m = ModelFiles::open(dir.str());
  EXPECT_EQ(m.config().get_int("num_attention_heads"), 2);
  EXPECT_EQ(m.names(), (std::vector<std::string>{"v", "w"}));
  EXPECT_EQ(m.total_bytes(), 20u);
  EXPECT_TRUE(m.has("w"));
  EXPECT_FALSE(m.has("x"));
  EXPECT_EQ(m.tensor("w").ptr<float>()[3], 4.f);
  EXPECT_EQ(m.files().size(), 1u);
  expect_contains(error_of([&] { m.tensor("model.layers.0.q_proj.weight"); }),
                  {"'model.layers.0.q_proj.weight'", dir.str()});
}

// A [3, 5] e4m3 weight in 2 x 4 blocks (partial on both axes): each value times its block's scale_inv, in the
// config's dtype; the scales are consumed. A scale tensor of another shape is refused, naming it and the weight.
TEST(ModelFiles, Fp8BlockScaledWeightsAreDequantized) {
  ScratchDir dir;
  write_file(dir.path() / "config.json",
             std::string(R"({"torch_dtype": "float32", "quantization_config": {"quant_method": "fp8",
                             "weight_block_size": [2, 4]}})"));
  std::vector<uint8_t> w(15);
  for (size_t i = 0; i < w.size(); ++i) w[i] = f32_to_f8e4m3(float(i % 5) - 2.f);  // -2 .. 2, exact in e4m3
  const std::vector<float> scales{1.f, 2.f, 3.f, 0.5f};  // [2, 2]
  auto write = [&](std::vector<int64_t> scale_shape) {
    write_file(dir.path() / "model.safetensors",
               safetensors_bytes({raw_tensor("p.weight", "F8_E4M3", {3, 5}, w),
                                  raw_tensor("p.weight_scale_inv", "F32", scale_shape,
                                             std::vector<float>(scales.begin(), scales.begin() + scale_shape[0] *
                                                                                              scale_shape[1])),
                                  raw_tensor("n.weight", "F32", {2}, std::vector<float>{1, 2})}));
  };
  write({2, 2});
  ModelFiles m = ModelFiles::open(dir.str());
  EXPECT_EQ(m.names(), (std::vector<std::string>{"n.weight", "p.weight"}));
  EXPECT_EQ(m.nbytes("p.weight"), 15u * 4u);  // as it will be read, before it is
  const TensorView t = m.tensor("p.weight");
  ASSERT_EQ(t.dtype, DType::f32);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 5; ++j)
      EXPECT_EQ(t.ptr<float>()[i * 5 + j], (float((i * 5 + j) % 5) - 2.f) * scales[size_t((i / 2) * 2 + j / 4)])
          << i << "," << j;
  EXPECT_EQ(m.stored("p.weight").data, t.data);  // converted once
  write({2, 1});
  expect_contains(error_of([&] { ModelFiles::open(dir.str()); }),
                  {"'p.weight_scale_inv'", "expected float scales [2, 2] for the [3, 5] weight 'p.weight'",
                   "2 x 4 blocks", "F32 [2, 1]"});
}

// An empty weight takes no bytes, so its other dimension is not bounded by the file: [2^63 - 1, 0] in 1 x 1 blocks
// asked the dequantization for 2^63 - 1 tasks when read. Refused at open, naming the weight.
TEST(ModelFiles, EmptyFp8WeightsAreRefused) {
  ScratchDir dir;
  write_file(dir.path() / "config.json",
             std::string(R"({"torch_dtype": "float32", "quantization_config": {"quant_method": "fp8",
                             "weight_block_size": [1, 1]}})"));
  const int64_t huge = std::numeric_limits<int64_t>::max();
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{huge, 0}, {0, 3}}) {
    write_file(dir.path() / "model.safetensors",
               safetensors_bytes({raw_tensor("p.weight", "F8_E4M3", shape, std::vector<uint8_t>{}),
                                  raw_tensor("p.weight_scale_inv", "F32", shape, std::vector<float>{})}));
    expect_contains(error_of([&] { ModelFiles::open(dir.str()); }),
                    {"model.safetensors: tensor 'p.weight'", "an F8_E4M3 weight must have rows and columns, got ["});
  }
}

// ceil(rows / block) without forming rows + block - 1, which overflows for rows near 2^63.
TEST(Fp8Blocks, ScaleShapeOfTheLargestSizes) {
  const int64_t huge = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(fp8_scale_shape(huge, huge, {128, 1}), (std::vector<int64_t>{huge / 128 + 1, huge}));
  EXPECT_EQ(fp8_scale_shape(256, 3, {128, 2}), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(fp8_scale_shape(0, 1, {128, 128}), (std::vector<int64_t>{0, 1}));
}

TEST(ModelFiles, Sharded) {
  ScratchDir dir;
  write_sharded(dir, kWeightMap);
  ModelFiles m = ModelFiles::open(dir.str());
  EXPECT_EQ(m.files().size(), 2u);
  EXPECT_EQ(m.names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(m.total_bytes(), 8u + 12 + 4);
  EXPECT_EQ(m.tensor("b").ptr<float>()[2], 5.f);
  EXPECT_EQ(m.tensor("b").shape_str(), "[1, 3]");
  TensorView c = m.tensor("c");
  EXPECT_EQ(c.dtype, DType::bf16);
  EXPECT_EQ(bf16_to_f32(c.ptr<uint16_t>()[1]), 7.f);
  EXPECT_EQ(m.info("c").dtype, FileDType::BF16);
  EXPECT_NE(m.file("c").path().find("model-00002-of-00002"), std::string::npos);
  EXPECT_FALSE(m.has("d"));
}

TEST(ModelFiles, TensorsOutsideTheIndexAreNotExposed) {
  ScratchDir dir;
  write_sharded(dir, R"({"a": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"})");
  ModelFiles m = ModelFiles::open(dir.str());
  EXPECT_EQ(m.names(), (std::vector<std::string>{"a", "c"}));
  EXPECT_FALSE(m.has("b"));
}

TEST(ModelFiles, SingleFileWinsOverIndex) {
  ScratchDir dir;
  write_sharded(dir, kWeightMap);
  write_file(dir.path() / "model.safetensors", safetensors_bytes({raw_tensor("z", "U8", {1}, std::vector<uint8_t>{1})}));
  EXPECT_EQ(ModelFiles::open(dir.str()).names(), (std::vector<std::string>{"z"}));
}

TEST(ModelFiles, BrokenLayoutsNamed) {
  {
    ScratchDir dir;
    write_sharded(dir, R"({"a": "model-00001-of-00002.safetensors", "q": "model-00003-of-00003.safetensors"})");
    expect_contains(error_of([&] { ModelFiles::open(dir.str()); }), {"model-00003-of-00003.safetensors", "'q'", "does not exist"});
  }
  {
    ScratchDir dir;
    write_sharded(dir, R"({"a": "model-00001-of-00002.safetensors", "c": "model-00001-of-00002.safetensors"})");
    expect_contains(error_of([&] { ModelFiles::open(dir.str()); }), {"'c'", "model-00001-of-00002.safetensors", "does not contain"});
  }
  {
    ScratchDir dir;
    write_sharded(dir, R"({"a": "../model-00001-of-00002.safetensors"})");
    expect_contains(error_of([&] { ModelFiles::open(dir.str()); }), {"'a'", "not a plain file name"});
  }
  {
    ScratchDir dir;
    write_sharded(dir, R"({"a": 3})");
    expect_contains(error_of([&] { ModelFiles::open(dir.str()); }), {"'a'", "not a file name"});
  }
  {
    ScratchDir dir;
    write_sharded(dir, "[]");
    expect_contains(error_of([&] { ModelFiles::open(dir.str()); }), {"model.safetensors.index.json", "weight_map"});
  }
  {
    ScratchDir dir;
    write_sharded(dir, kWeightMap);
    write_file(dir.path() / "model.safetensors.index.json", std::string("{\"weight_map\": {"));
    expect_contains(error_of([&] { ModelFiles::open(dir.str()); }), {"model.safetensors.index.json", "invalid JSON"});
  }
  {
    ScratchDir dir;
    write_sharded(dir, kWeightMap);
    // A truncated shard is caught when the directory is opened.
    write_file(dir.path() / "model-00002-of-00002.safetensors", std::vector<uint8_t>{8, 0, 0});
    expect_contains(error_of([&] { ModelFiles::open(dir.str()); }), {"model-00002-of-00002.safetensors", "too short"});
  }
  {
    ScratchDir dir;
    write_file(dir.path() / "config.json", std::string(kConfig));
    expect_contains(error_of([&] { ModelFiles::open(dir.str()); }), {dir.str(), "no weights"});
  }
  {
    ScratchDir dir;
    write_file(dir.path() / "model.safetensors", safetensors_bytes({raw_tensor("z", "U8", {1}, std::vector<uint8_t>{1})}));
    expect_contains(error_of([&] { ModelFiles::open(dir.str()); }), {"config.json", "cannot open"});
  }
  expect_contains(error_of([&] { ModelFiles::open("/nonexistent/model"); }), {"model path not found", "/nonexistent/model"});
  expect_contains(error_of([&] { ModelFiles::read_config("/nonexistent/model"); }),
                  {"model path not found", "/nonexistent/model"});
  {
    ScratchDir dir;
    write_file(dir.path() / "plain.bin", std::string("x"));
    expect_contains(error_of([&] { ModelFiles::open((dir.path() / "plain.bin").string()); }), {"not a directory"});
  }
}

void write_wrapper(const ScratchDir& dir, std::initializer_list<std::string> names) {
  write_file(dir.path() / "config.json", std::string(R"({"text_config": {"hidden_size": 2}})"));
  std::vector<testing::RawTensor> tensors;
  float x = 0;
  for (const std::string& n : names) tensors.push_back(raw_tensor(n, "F32", {1}, std::vector<float>{x++}));
  write_file(dir.path() / "model.safetensors", safetensors_bytes(tensors));
}

TEST(ModelFiles, WrapperExposesItsLanguageModelUnderTextNames) {
  ScratchDir dir;
  write_wrapper(dir, {"lm_head.weight", "model.language_model.embed_tokens.weight", "model.language_model.norm.weight",
                      "model.visual.patch_embed.proj.weight", "model.multi_modal_projector.linear.weight"});
  ModelFiles m = ModelFiles::open(dir.str());
  EXPECT_EQ(m.names(), (std::vector<std::string>{"lm_head.weight", "model.embed_tokens.weight", "model.norm.weight"}));
  EXPECT_EQ(m.set_aside(),
            (std::vector<std::string>{"model.multi_modal_projector.linear.weight", "model.visual.patch_embed.proj.weight"}));
  EXPECT_EQ(m.tensor("model.norm.weight").ptr<float>()[0], 2.f);
  EXPECT_EQ(m.stored_name("model.norm.weight"), "model.language_model.norm.weight");
  EXPECT_EQ(m.total_bytes(), 12u);
  EXPECT_FALSE(m.has("model.language_model.norm.weight"));
  expect_contains(error_of([&] { m.tensor("model.layers.0.q_proj.weight"); }), {"'model.layers.0.q_proj.weight'"});
}

TEST(ModelFiles, OlderWrapperLayoutToo) {
  ScratchDir dir;
  write_wrapper(dir, {"language_model.model.norm.weight", "language_model.lm_head.weight", "vision_tower.x"});
  ModelFiles m = ModelFiles::open(dir.str());
  EXPECT_EQ(m.names(), (std::vector<std::string>{"lm_head.weight", "model.norm.weight"}));
  EXPECT_EQ(m.set_aside(), (std::vector<std::string>{"vision_tower.x"}));
}

TEST(ModelFiles, TextOnlyCheckpointsKeepTheirNames) {
  ScratchDir dir;  // a text_config alone (some text models nest their settings) does not rename anything
  write_wrapper(dir, {"model.norm.weight", "vision.x"});
  EXPECT_EQ(ModelFiles::open(dir.str()).names(), (std::vector<std::string>{"model.norm.weight", "vision.x"}));
}

TEST(ModelFiles, WrapperNamesThatCollideAreNamed) {
  ScratchDir dir;
  write_wrapper(dir, {"model.language_model.norm.weight", "language_model.model.norm.weight"});
  expect_contains(error_of([&] { ModelFiles::open(dir.str()); }),
                  {"'language_model.model.norm.weight'", "'model.language_model.norm.weight'", "'model.norm.weight'"});
}

}  // namespace
}  // namespace attnzoo
