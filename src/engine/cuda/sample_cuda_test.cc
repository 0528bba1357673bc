// The GPU sampler on a GPU against the CPU's Sampler on the same rows and seeds: Qwen-sized vocabularies (151936),
// a decode batch of 64 rows with every filter, penalties and a padded row stride, several steps, so each row's
// generator advances the same way on both sides; the engine's form (samplers sharing a row, a refused row reported
// alone). Skipped without a GPU; the emulated kernel
// (testing/cuda_emulation/sample_cases.cc) covers the ties and refusals in every build.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/device.h"
#include "engine/sample_rows.h"
#include "testing/random_logits.h"

namespace attnzoo {
namespace {

class SampleRowsGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU: " << cuda_unavailable_reason();
  }
};

SamplingParams settings(int row) {
  SamplingParams p;
  switch (row % 6) {
    case 0: p.temperature = 0.f; break;
    case 1: break;
    case 2: p.top_k = 50; p.temperature = 0.8f; break;
    case 3: p.top_p = 0.9f; break;
    case 4: p.top_k = 20; p.top_p = 0.7f; p.min_p = 0.05f; p.repetition_penalty = 1.2f; break;
    case 5: p.min_p = 0.1f; p.presence_penalty = 0.5f; p.frequency_penalty = 0.3f; break;
  }
  p.seed = 100 + uint64_t(row);
  return p;
}

TEST_F(SampleRowsGpu, MatchesTheCpuSamplerStepAfterStep) {
  const int64_t rows = 64, vocab = 151936, stride = vocab + 64;
  std::vector<Sampler> cpu, gpu;
  cpu.reserve(rows);
  gpu.reserve(rows);
  for (int r = 0; r < rows; ++r) cpu.emplace_back(settings(r)), gpu.emplace_back(settings(r));
  std::vector<std::vector<int32_t>> history(rows);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> host(size_t(rows * stride));
  DeviceBuffer device(Device::cuda(0), host.size() * sizeof(float));
  int mismatches = 0;
  for (int step = 0; step < 4; ++step) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < vocab; ++i) host[size_t(r * stride + i)] = normal(rng) * (1.f + float(r % 4));
    device.upload(host.data(), host.size() * sizeof(float));
    TensorView on_host = TensorView::contiguous(host.data(), DType::f32, {rows, vocab});
    on_host.strides[0] = stride;
    TensorView on_gpu = on_host;
    on_gpu.data = device.data();
    on_gpu.device = Device::cuda(0);
    std::vector<Sampler*> cpu_rows, gpu_rows;
    std::vector<std::span<const int32_t>> contexts;
    for (int64_t r = 0; r < rows; ++r) {
      cpu_rows.push_back(&cpu[size_t(r)]);
      gpu_rows.push_back(&gpu[size_t(r)]);
      contexts.emplace_back(history[size_t(r)]);
    }
    std::vector<int32_t> want(rows), got(rows);
    sample_rows(on_host, cpu_rows, contexts, want);
    sample_rows(on_gpu, gpu_rows, contexts, got);
    for (int64_t r = 0; r < rows; ++r) {
      if (settings(int(r)).greedy()) EXPECT_EQ(got[size_t(r)], want[size_t(r)]) << "greedy row " << r;
      mismatches += got[size_t(r)] != want[size_t(r)];
      history[size_t(r)].push_back(want[size_t(r)]);
    }
  }
  // A draw within rounding of a token boundary may land on the neighbour; across 256 draws none should.
  EXPECT_EQ(mismatches, 0);
}

TEST_F(SampleRowsGpu, SamplersSharingRowsAndARefusedRowAsOnTheCpu) {
  // The engine's form: the n samples of a prompt read its one row; a NaN row fails its sampler alone.
  const int64_t rows = 3, vocab = 32000;
  std::vector<float> host = testing::random_logits(size_t(rows * vocab), 9);
  host[size_t(2 * vocab + 77)] = NAN;
  DeviceBuffer device(Device::cuda(0), host.size() * sizeof(float));
  device.upload(host.data(), host.size() * sizeof(float));
  const TensorView on_host = TensorView::contiguous(host.data(), DType::f32, {rows, vocab});
  TensorView on_gpu = on_host;
  on_gpu.data = device.data();
  on_gpu.device = Device::cuda(0);
  const std::vector<int64_t> logit_rows = {0, 1, 1, 2, 1, 0};
  std::vector<Sampler> cpu, gpu;
  for (size_t i = 0; i < logit_rows.size(); ++i) cpu.emplace_back(settings(int(i))), gpu.emplace_back(settings(int(i)));
  std::vector<Sampler*> cpu_rows, gpu_rows;
  for (size_t i = 0; i < logit_rows.size(); ++i) cpu_rows.push_back(&cpu[i]), gpu_rows.push_back(&gpu[i]);
  const std::vector<int32_t> seen = {5, 5, 900, 31000};
  const std::vector<std::span<const int32_t>> contexts(logit_rows.size(), seen);
  std::vector<int32_t> want(logit_rows.size()), got(logit_rows.size());
  std::vector<std::string> want_errors(logit_rows.size()), got_errors(logit_rows.size());
  sample_rows(on_host, logit_rows, cpu_rows, contexts, want, want_errors);
  sample_rows(on_gpu, logit_rows, gpu_rows, contexts, got, got_errors);
  for (size_t i = 0; i < logit_rows.size(); ++i) {
    EXPECT_EQ(got[i], want[i]) << "sampler " << i;
    EXPECT_EQ(got_errors[i], want_errors[i]) << "sampler " << i;
  }
  EXPECT_EQ(got[3], -1);
  EXPECT_EQ(got_errors[3], "logits: contain NaN");
}

}  // namespace
}  // namespace attnzoo
