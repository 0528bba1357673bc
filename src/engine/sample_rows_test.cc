// sample_rows on host logits is Sampler::sample row by row (errors naming the row); its checks come before any
// device is asked for, and device logits reach the GPU branch (here: the named error of a build or machine
// without one). The engine's form: samplers sharing a row, refused rows reported alone. The GPU's own results:
// engine/cuda/sample_cuda_test.cc and the emulated kernel's cases.
#include "engine/sample_rows.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "testing/random_logits.h"

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
  std::vector<float> logits = testing::random_logits(size_t(rows * stride), 4);
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

TEST(SampleRows, SamplersSharingARowDrawEachFromTheirOwnGenerator) {
  const int64_t rows = 2, vocab = 40;
  std::vector<float> logits = testing::random_logits(size_t(rows * vocab), 7);
  const TensorView v = TensorView::contiguous(logits.data(), DType::f32, {rows, vocab});
  // Three samplers on row 1 (a prompt's n = 3 samples, seeds apart, contexts apart), one greedy on row 0.
  std::vector<SamplingParams> params(4);
  for (size_t i = 0; i < 4; ++i) {
    params[i].temperature = i == 0 ? 0.f : 1.3f;
    params[i].seed = 50 + i;
    params[i].repetition_penalty = 1.2f;
  }
  std::vector<Sampler> samplers(params.begin(), params.end());
  Sampler* ptrs[] = {&samplers[0], &samplers[1], &samplers[2], &samplers[3]};
  const std::vector<int32_t> a{4, 4, 9}, b{17};
  const std::span<const int32_t> contexts[] = {a, a, b, {}};
  const int64_t logit_rows[] = {0, 1, 1, 1};
  int32_t out[4];
  std::vector<std::string> errors(4, "stale");
  sample_rows(v, logit_rows, ptrs, contexts, out, errors);
  for (size_t i = 0; i < 4; ++i) {
    Sampler twin(params[i]);
    const std::span<const float> row(logits.data() + logit_rows[i] * vocab, size_t(vocab));
    EXPECT_EQ(out[i], twin.sample(row, contexts[i])) << "sampler " << i;
    EXPECT_EQ(errors[i], "") << "sampler " << i;
  }
}

TEST(SampleRows, ARefusedRowIsReportedAndTheOthersStillSample) {
  const int64_t vocab = 10;
  std::vector<float> logits(size_t(3 * vocab), 0.5f);
  logits[3] = 2.f;
  logits[size_t(vocab + 4)] = NAN;
  for (int64_t i = 0; i < vocab; ++i) logits[size_t(2 * vocab + i)] = -INFINITY;
  const TensorView v = TensorView::contiguous(logits.data(), DType::f32, {3, vocab});
  Sampler a(SamplingParams{.temperature = 0.f}), b(SamplingParams{}), c(SamplingParams{}), d(SamplingParams{.temperature = 0.f});
  Sampler* ptrs[] = {&a, &b, &c, &d};
  const std::span<const int32_t> contexts[4] = {};
  const int64_t logit_rows[] = {0, 1, 2, 0};
  int32_t out[4];
  std::vector<std::string> errors(4);
  sample_rows(v, logit_rows, ptrs, contexts, out, errors);
  EXPECT_EQ(out[0], 3);
  EXPECT_EQ(out[3], 3);
  EXPECT_EQ(out[1], -1);
  EXPECT_EQ(out[2], -1);
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "logits: contain NaN");
  EXPECT_EQ(errors[2], "logits: are all -inf: no token can be sampled");
  // The engine's form checks its own arguments by name.
  const int64_t outside[] = {0, 1, 3, 0};
  expect_error<ArgumentError>([&] { sample_rows(v, outside, ptrs, contexts, out, errors); },
                              "logit_rows: entry 2 is 3, outside the logits' 3 rows");
  expect_error<ArgumentError>([&] { sample_rows(v, std::span(logit_rows, 3), ptrs, contexts, out, errors); },
                              "logit_rows: needs one per sampler: 3 for 4");
  expect_error<ArgumentError>([&] { sample_rows(v, logit_rows, ptrs, contexts, out, std::span(errors).first(2)); },
                              "errors: needs one entry per sampler");
}

}  // namespace
}  // namespace attnzoo
