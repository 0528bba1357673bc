#include "models/model.h"

#include <gtest/gtest.h>

#include <cstring>
#include <tuple>

#include "core/amx.h"
#include "core/error.h"
#include "layers/linear.h"
#include "models/decoder.h"
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

// safetensors maps I32 / I64 / U8 to integer dtypes; a norm weight stored so used to load as zeros. Refused by
// name with its dtype.
TEST(Model, IntegerNormWeightsAreRefusedByName) {
  for (const auto& [tensor, dtype, name] :
       {std::tuple{"model.norm.weight", "I32", "int32"}, {"model.layers.0.input_layernorm.weight", "I64", "int64"},
        {"model.layers.0.post_attention_layernorm.weight", "U8", "uint8"}}) {
    SCOPED_TRACE(tensor);
    ScratchDir dir;
    testing::write_file(dir.path() / "config.json", kConfig);
    std::vector<testing::RawTensor> tensors;
    for (const auto& [n, shape] : testing::one_layer_llama_shapes()) {
      const int64_t count = shape.size() == 2 ? shape[0] * shape[1] : shape[0];
      if (n != tensor) {
        tensors.push_back(raw_tensor(n, "F32", shape, std::vector<float>(size_t(count), 0.01f)));
        continue;
      }
      const size_t width = std::string(dtype) == "I64" ? 8 : std::string(dtype) == "I32" ? 4 : 1;
      std::vector<uint8_t> ones(size_t(count) * width, 0);
      for (int64_t i = 0; i < count; ++i) ones[size_t(i) * width] = 1;  // 1 in every element, little-endian
      tensors.push_back(raw_tensor(n, dtype, shape, ones));
    }
    testing::write_file(dir.path() / "model.safetensors", testing::safetensors_bytes(tensors));
    const std::string e = load_error(dir.str());
    EXPECT_NE(e.find(std::string("model.safetensors: tensor '") + tensor + "'"), std::string::npos) << e;
    EXPECT_NE(e.find(std::string("dtype ") + name + ", expected float32, bfloat16 or float16"), std::string::npos) << e;
  }
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

// f16 projections are widened to f32 at load on every CPU. Each copy's source is the file mapping, which the
// loader releases as the copy reads it: every projection's f16 bytes (the tied head's too) are counted released,
// through the loaders' hook, not assumed from what the Linears hold.
TEST(Model, F16ProjectionsAreWidenedAndTheLoaderReleasesTheirFilePages) {
  ScratchDir dir;
  testing::write_file(dir.path() / "config.json", kConfig);
  std::vector<testing::RawTensor> tensors;
  uint64_t matrix_bytes = 0;
  for (const auto& [name, shape] : testing::one_layer_llama_shapes()) {
    const int64_t n = shape.size() == 2 ? shape[0] * shape[1] : shape[0];
    std::vector<uint16_t> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = uint16_t(0x2000 + 0x40 * ((i * 7) % 13));  // small positive f16
    if (shape.size() == 2) matrix_bytes += uint64_t(n) * 2;
    tensors.push_back(raw_tensor(name, "F16", shape, v));
  }
  testing::write_file(dir.path() / "model.safetensors", testing::safetensors_bytes(tensors));
  auto model = Model::load(dir.str());
  EXPECT_EQ(model->info().owned_weight_bytes, 2 * matrix_bytes);
  EXPECT_EQ(model->info().released_weight_bytes, matrix_bytes);
}

// A bf16 safetensors checkpoint places its tensors wherever the header ends (8-byte steps), here 24 bytes past a
// cache line. Where the AMX tiles run, the projections' rows are copied onto lines once at load (counted as owned
// weight bytes), so a long prefill never copies them again: the AMX GEMMs run, none of them staged. The tied
// embedding's lookups read the head's copy.
TEST(Model, Bf16SafetensorsProjectionsOffACacheLineAreAlignedOnceAtLoad) {
  if (!amx_bf16_enabled()) GTEST_SKIP() << "AMX tiles do not run here (" << amx_support().reason << ")";
  ScratchDir dir;
  testing::write_file(dir.path() / "config.json", std::string(R"({"architectures": ["LlamaForCausalLM"],
  "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 2,
  "num_key_value_heads": 1, "vocab_size": 5, "max_position_embeddings": 512, "rms_norm_eps": 1e-5,
  "rope_theta": 10000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16"})"));
  const testing::TinyTensorShapes shapes = testing::one_layer_llama_shapes(64);
  std::vector<testing::RawTensor> tensors;
  uint64_t matrix_bytes = 0;  // every 2-D tensor is a projection's (the embedding also the tied head's)
  for (const auto& [name, shape] : shapes) {
    const int64_t n = shape.size() == 2 ? shape[0] * shape[1] : shape[0];
    std::vector<uint16_t> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const float f = 0.02f * float((i * 7) % 13) - 0.1f + (shape.size() == 1 ? 1.f : 0.f);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      v[size_t(i)] = uint16_t(bits >> 16);
    }
    if (shape.size() == 2) matrix_bytes += uint64_t(n) * 2;
    tensors.push_back(raw_tensor(name, "BF16", shape, v));
  }
  // Every tensor's size is whole cache lines, so each starts where the data does: 8 + the padded header on.
  std::string pad;
  while ((8 + (testing::safetensors_header(tensors, {{"pad", pad}}).size() + 7) / 8 * 8) % 64 != 24) pad += "x";
  testing::write_file(dir.path() / "model.safetensors", testing::safetensors_bytes(tensors, {{"pad", pad}}));
  auto model = Model::load(dir.str(), load_options(resolve_formats(dir.str(), {})));  // as the front ends load
  EXPECT_EQ(model->info().owned_weight_bytes, matrix_bytes);
  EXPECT_EQ(model->info().released_weight_bytes, matrix_bytes);  // moved: the mapping's pages go in their place
  // The tied head's copy serves the lookups too: the table is resident once.
  const auto* decoder = dynamic_cast<const DecoderModel*>(model.get());
  ASSERT_NE(decoder, nullptr);
  EXPECT_EQ(decoder->parts().embed->matrix().data, decoder->parts().lm_head->matrix().data);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(decoder->parts().lm_head->matrix().data) % 64, 0u);
  const LinearBf16GemmCounts before = linear_bf16_gemm_counts();
  std::vector<int32_t> ids(300);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i % 5);
  for (int repeat = 0; repeat < 2; ++repeat) {
    auto seq = model->new_sequence();
    Batch batch;
    batch.add(*seq, ids);
    model->forward(batch);
  }
  EXPECT_GE(linear_bf16_gemm_counts().amx - before.amx, 2u * 7u);  // seven projections per prefill
  EXPECT_EQ(linear_bf16_gemm_counts().amx_staged, before.amx_staged);
}

}  // namespace
}  // namespace attnzoo
