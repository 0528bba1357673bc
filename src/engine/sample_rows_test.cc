// sample_rows on host logits is Sampler::sample row by row (errors naming the row); its checks come before any
// device is asked for, and device logits reach the GPU branch (here: the named error of a build or machine
// without one). The GPU's own results: engine/cuda/sample_cuda_test.cc and the emulated kernel's cases.
#include "engine/sample_rows.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"

namespace attnzoo {
namespace {

template <class E, class F>
void expect_error(F f, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "no error; wanted " << text;
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(SampleRows, HostRowsAreTheSamplersDraws) {
  const int64_t rows = 3, vocab = 50, stride = 64;
  std::vector<float> logits(size_t(rows * stride));
  std::mt19937 rng(4);
  std::normal_distribution<float> normal(0.f, 2.f);
  for (float& x : logits) x = normal(rng);
  TensorView v = TensorView::contiguous(logits.data(), DType::f32, {rows, vocab});
  v.strides[0] = stride;
  SamplingParams p;
  p.top_k = 10;
  p.seed = 9;
  Sampler a(p), b(p), c(p), ref(p);
  Sampler* samplers[] = {&a, &b, &c};
  const std::vector<int32_t> seen{1, 2, 2};
  const std::span<const int32_t> contexts[] = {seen, {}, seen};
  int32_t out[3];
  sample_rows(v, samplers, contexts, out);
  for (int64_t r = 0; r < rows; ++r) {
    Sampler twin(p);
    EXPECT_EQ(out[r], twin.sample(std::span<const float>(logits.data() + r * stride, size_t(vocab)), contexts[r]));
  }
}

TEST(SampleRows, ChecksNameTheArgumentAndTheRow) {
  std::vector<float> logits(20, 0.f);
  logits[13] = NAN;
  const TensorView v = TensorView::contiguous(logits.data(), DType::f32, {2, 10});
  Sampler a(SamplingParams{}), b(SamplingParams{});
  Sampler* two[] = {&a, &b};
  Sampler* one[] = {&a};
  const std::span<const int32_t> contexts[2] = {};
  int32_t out[2];
  expect_error<ArgumentError>([&] { sample_rows(v, two, contexts, out); }, "logits: contain NaN (row 1)");
  expect_error<ArgumentError>([&] { sample_rows(v, one, std::span(contexts, 1), std::span(out, 1)); },
                              "samplers: needs one per row: 1 for 2 rows");
  TensorView i32 = v;
  i32.dtype = DType::i32;
  expect_error<ArgumentError>([&] { sample_rows(i32, two, contexts, out); }, "logits: must be float32");
  TensorView on_gpu = v;
  on_gpu.device = Device::cuda(0);
  logits[13] = 0.f;
  // A device the build or the machine cannot reach is said so by name; validation came first.
  expect_error<DeviceError>([&] { sample_rows(on_gpu, two, contexts, out); }, "cuda:0");
}

}  // namespace
}  // namespace attnzoo
