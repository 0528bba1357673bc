#pragma once
// What the GPU runners' end-to-end tests (models/cuda/*_runner_test.cc) share: a tiny checkpoint loaded on each side
// with its pool's slots handed out in its own shuffled order, logits held to bf16 tolerance of the CPU's, and one
// scenario over four sequences fed alike on both sides. The tiny checkpoints' vocabulary is kTinyDecoderVocab.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "models/model.h"
#include "testing/tiny_decoder.h"

namespace attnzoo::testing {

// `kv_dtype`: the paged cache's element type on both sides (the decoders take bf16: the same cache rounding).
inline std::unique_ptr<Model> load_shuffled(const std::string& path, Device device, uint64_t shuffle_seed,
                                            DType kv_dtype) {
  LoadOptions o;
  o.pool.device = device;
  o.pool.kv_dtype = kv_dtype;
  o.pool.bytes = 32 << 20;
  o.pool.shuffle_seed = shuffle_seed;
  return Model::load(path, o);
}

inline int64_t argmax_logit(const float* row) {
  return std::max_element(row, row + kTinyDecoderVocab) - row;
}

// Every row within bf16 tolerance of the CPU's; the argmax equal where the CPU's top two are not a near-tie.
inline void expect_close_logits(const std::vector<float>& cpu, const std::vector<float>& gpu,
                                const std::string& what) {
  const size_t V = size_t(kTinyDecoderVocab);
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  float scale = 0.f, worst = 0.f;
  for (size_t i = 0; i < cpu.size(); ++i) {
    scale = std::max(scale, std::abs(cpu[i]));
    worst = std::max(worst, std::abs(cpu[i] - gpu[i]));
  }
  const float tol = 0.03f * scale + 0.02f;
  EXPECT_LE(worst, tol) << what << ": largest logit " << scale;
  for (size_t r = 0; r < cpu.size() / V; ++r) {
    const float* c = cpu.data() + r * V;
    std::vector<float> sorted(c, c + V);
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    if (sorted[0] - sorted[1] > 2 * tol)
      EXPECT_EQ(argmax_logit(c), argmax_logit(gpu.data() + r * V)) << what << " row " << r;
  }
}

// One model's side of a scenario: its own sequences, fed the same tokens as the other side's.
struct ScenarioSide {
  std::unique_ptr<Model> model;
  std::vector<std::unique_ptr<Sequence>> seqs;

  std::vector<float> step(const std::vector<std::vector<int32_t>>& ids, const std::vector<size_t>& which,
                          bool last_only) {
    Batch b;
    for (size_t i = 0; i < which.size(); ++i) b.add(*seqs[which[i]], ids[i]);
    return model->forward(b, last_only);
  }
};

// Random prompts from a seeded stream: ids(n) is the next n token ids, fed alike to every side.
struct ScenarioTokens {
  std::mt19937 rng;
  std::uniform_int_distribution<int32_t> token{0, int32_t(kTinyDecoderVocab) - 1};

  explicit ScenarioTokens(uint32_t seed) : rng(seed) {}
  std::vector<int32_t> operator()(int n) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (auto& x : v) x = token(rng);
    return v;
  }
};

// `n` new sequences on each of `sides`, so that sequence i is the same request on all of them.
inline void open_sequences(std::initializer_list<ScenarioSide*> sides, int n) {
  for (ScenarioSide* side : sides)
    for (int i = 0; i < n; ++i) side->seqs.push_back(side->model->new_sequence());
}

// The model at `path` (a checkpoint directory or a GGUF file) on the CPU and the GPU: a ragged prefill of 37,
// `short_prompt` and 70 tokens, six decode steps with the CPU's greedy choice fed to both, three tokens per sequence
// (a verify step's shape), a prompt starting with the first prompt (its cached blocks or state snapshot reused) and
// a 19-token chunk after it. `name` prefixes the failures.
inline void run_cpu_gpu_scenario(const std::string& path, const std::string& name, uint32_t seed, DType kv_dtype,
                                 int short_prompt) {
  const size_t V = size_t(kTinyDecoderVocab);
  ScenarioSide cpu{load_shuffled(path, Device::cpu(), 3, kv_dtype), {}},
      gpu{load_shuffled(path, Device::cuda(), 5, kv_dtype), {}};
  ScenarioTokens ids(seed);
  open_sequences({&cpu, &gpu}, 4);

  const std::vector<std::vector<int32_t>> prompts = {ids(37), ids(short_prompt), ids(70)};
  expect_close_logits(cpu.step(prompts, {0, 1, 2}, false), gpu.step(prompts, {0, 1, 2}, false), name + " prefill");

  std::vector<int32_t> next = {1, 2, 3};
  for (int s = 0; s < 6; ++s) {
    std::vector<std::vector<int32_t>> step_ids;
    for (int32_t id : next) step_ids.push_back({id});
    const std::vector<float> c = cpu.step(step_ids, {0, 1, 2}, false);
    expect_close_logits(c, gpu.step(step_ids, {0, 1, 2}, false), name + " decode step " + std::to_string(s));
    for (size_t r = 0; r < 3; ++r) next[r] = int32_t(argmax_logit(c.data() + r * V));
  }
  const std::vector<std::vector<int32_t>> three = {ids(3), ids(3)};
  expect_close_logits(cpu.step(three, {0, 2}, false), gpu.step(three, {0, 2}, false), name + " Tq 3");

  std::vector<int32_t> shared = prompts[0];
  for (int32_t id : ids(12)) shared.push_back(id);
  expect_close_logits(cpu.step({shared}, {3}, true), gpu.step({shared}, {3}, true), name + " prefix reuse");
  // On a paged cache: rounds of 8, 8 and 3 queries over it.
  const std::vector<std::vector<int32_t>> chunk = {ids(19)};
  expect_close_logits(cpu.step(chunk, {3}, false), gpu.step(chunk, {3}, false), name + " chunk after a prefix");
}

}  // namespace attnzoo::testing
