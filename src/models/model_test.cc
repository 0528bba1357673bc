#include "models/model.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "loader/load_error.h"
#include "loader/test_files.h"
#include "models/model_device.h"
#include "models/registry.h"
#include "testing/tiny_llama.h"

namespace attnzoo {
namespace {

using testing::raw_tensor;
using testing::ScratchDir;

constexpr const char* kConfig = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 8,
  "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
  "vocab_size": 5, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": true})";

// A one-layer Llama: every tensor filled with small values, optionally one missing or misshapen.
void write_model(const ScratchDir& dir, const std::string& config, const std::string& skip = "",
                 const std::string& misshape = "") {
  testing::write_file(dir.path() / "config.json", config);
  const testing::TinyTensorShapes shapes = testing::one_layer_llama_shapes();
  std::vector<testing::RawTensor> tensors;
  for (auto [name, shape] : shapes) {
    if (name == skip) continue;
    if (name == misshape) shape[0] += 1;
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = 0.01f * float((i * 7) % 13) - 0.05f;
    tensors.push_back(raw_tensor(name, "F32", shape, v));
  }
  testing::write_file(dir.path() / "model.safetensors", testing::safetensors_bytes(tensors));
}

std::string load_error(const std::string& dir) {
  try {
    Model::load(dir);
  } catch (const LoadError& e) {
    return e.what();
  }
  return "";
}

TEST(Model, AGpuThisMachineCannotReachIsRefusedByName) {
  // Before the weights load: a build without CUDA, or no GPU, says so naming the option.
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present: models/cuda/decoder_cuda_runner_test.cc loads there";
  ScratchDir dir;
  write_model(dir, kConfig);
  LoadOptions o;
  o.pool.device = Device::cuda();
  o.pool.bytes = 1 << 20;
  try {
    Model::load(dir.str(), o);
    FAIL() << "a GPU pool was accepted";
  } catch (const ArgumentError& e) {
    const std::string why = cuda_built() ? "device: cuda:0 asked, but no GPU is usable here ("
                                         : "device: cuda:0 asked, but this build has no CUDA (";
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

TEST(Model, DeviceNamesResolveWhereTheRunnerComputes) {
  // "auto" is the CPU until the GPU runner has run on hardware (model_device.h); explicit names pass through for
  // load to judge.
  EXPECT_EQ(resolve_model_device("auto", "--device"), Device::cpu());
  EXPECT_TRUE(model_runs_on(resolve_model_device("auto", "--device")));
  EXPECT_EQ(resolve_model_device("cpu", "--device"), Device::cpu());
  EXPECT_EQ(resolve_model_device("cuda:1", "--device"), Device::cuda(1));
  try {
    resolve_model_device("gpu", "--device");
    FAIL() << "'gpu' was accepted";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("--device: expected cpu, cuda or cuda:N, got 'gpu'"), std::string::npos)
        << e.what();
  }
}

TEST(Model, LoadsAndRunsARaggedBatch) {
  ScratchDir dir;
  write_model(dir, kConfig);
  auto model = Model::load(dir.str());
  EXPECT_EQ(model->info().num_layers, 1);
  EXPECT_TRUE(model->info().tied_embeddings);
  EXPECT_EQ(model->info().cache_bytes_per_token(), 2 * 1 * 4 * 4);
  auto a = model->new_sequence(), b = model->new_sequence();
  Batch batch;
  const std::vector<int32_t> ia = {1, 2, 3}, ib = {4};
  batch.add(*a, ia);
  batch.add(*b, ib);
  const std::vector<float> logits = model->forward(batch);
  EXPECT_EQ(logits.size(), 4u * 5u);
  EXPECT_EQ(a->length(), 3);
  EXPECT_EQ(b->length(), 1);
  // The same tokens alone give the same rows: sequences in one batch do not see each other.
  auto c = model->new_sequence();
  Batch alone;
  alone.add(*c, ib);
  const std::vector<float> lc = model->forward(alone);
  for (int v = 0; v < 5; ++v) EXPECT_NEAR(lc[size_t(v)], logits[size_t(3 * 5 + v)], 1e-6);
}

TEST(Model, ForwardLogitsLeavesTheRowsInTheCallersHostVectorOnTheCpu) {
  ScratchDir dir;
  write_model(dir, kConfig);
  auto model = Model::load(dir.str());
  const std::vector<int32_t> ia = {1, 2, 3}, ib = {4, 0};
  const std::vector<int64_t> rows = {3, 0, 4};  // out of packed order: gathered into place
  auto run = [&](auto&& forward) {
    auto a = model->new_sequence(), b = model->new_sequence();
    Batch batch;
    batch.add(*a, ia);
    batch.add(*b, ib);
    return forward(batch);
  };
  const std::vector<float> want = run([&](const Batch& b) { return model->forward(b, rows); });
  std::vector<float> host(10 * 5, -1.f);  // bigger than needed: kept, not shrunk
  const TensorView got = run([&](const Batch& b) { return model->forward_logits(b, rows, host); });
  EXPECT_EQ(host.size(), 50u);
  EXPECT_EQ(got.data, host.data());
  EXPECT_EQ(got.device, Device::cpu());
  ASSERT_EQ(got.ndim, 2);
  EXPECT_EQ(got.shape[0], 3);
  EXPECT_EQ(got.shape[1], 5);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(host[i], want[i]) << i;
  // An empty list asks for every token's row, as forward's does; the vector grows to hold them.
  std::vector<float> grown;
  const TensorView every = run([&](const Batch& b) { return model->forward_logits(b, {}, grown); });
  EXPECT_EQ(every.shape[0], 5);
  EXPECT_EQ(grown.size(), 25u);
}

TEST(Model, ErrorsNameTheArchitectureTensorAndFile) {
  {
    ScratchDir dir;
    std::string cfg = kConfig;
    cfg.replace(cfg.find("LlamaForCausalLM"), 16, "FooForCausalLM");
    write_model(dir, cfg);
    EXPECT_NE(load_error(dir.str()).find("FooForCausalLM"), std::string::npos);
  }
  {
    ScratchDir dir;
    write_model(dir, kConfig, "model.layers.0.mlp.up_proj.weight");
    EXPECT_NE(load_error(dir.str()).find("model.layers.0.mlp.up_proj.weight"), std::string::npos);
  }
  {
    ScratchDir dir;
    write_model(dir, kConfig, "", "model.layers.0.self_attn.k_proj.weight");
    const std::string e = load_error(dir.str());
    EXPECT_NE(e.find("model.layers.0.self_attn.k_proj.weight"), std::string::npos) << e;
    EXPECT_NE(e.find("model.safetensors"), std::string::npos) << e;
  }
  EXPECT_EQ(find_model_builder("NopeForCausalLM"), nullptr);
}

TEST(Model, RejectsABadBatch) {
  ScratchDir dir;
  write_model(dir, kConfig);
  auto model = Model::load(dir.str());
  auto s = model->new_sequence();
  Batch bad;
  const std::vector<int32_t> ids = {5};  // vocab is 5
  bad.add(*s, ids);
  EXPECT_THROW(model->forward(bad), ArgumentError);
  EXPECT_EQ(s->length(), 0);
  Batch twice;
  const std::vector<int32_t> one = {1};
  twice.add(*s, one);
  twice.add(*s, one);
  EXPECT_THROW(model->forward(twice), ArgumentError);
}

}  // namespace
}  // namespace attnzoo
