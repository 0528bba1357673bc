#pragma once
// What the GPU runners' end-to-end tests (models/cuda/*_runner_test.cc) share: a tiny checkpoint loaded on each side
// with its pool's slots handed out in its own shuffled order, logits held to bf16 tolerance of the CPU's, and one
// scenario over four sequences fed alike on both sides, and decode steps replayed from CUDA graphs against the
// same steps launched one by one. The tiny checkpoints' vocabulary is kTinyDecoderVocab.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "models/cuda/step_graphs.h"
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

// Decode steps replayed from CUDA graphs (step_graphs.h) against the same steps launched kernel by kernel
// (ATTNZOO_CUDA_GRAPHS=0), on identically placed pool memory: equal bit for bit (the same kernels with the same
// arguments, none of them order-dependent), and both within bf16 tolerance of the CPU. The batch changes shape on
// the way (a step of two sequences, then four again) so that graphs are captured anew and an earlier one is
// replayed again; steps of three sequences are padded to four on the graphs' side (other GEMM shapes than the
// plain side's: compared with the CPU only). `path` is a checkpoint directory or a GGUF file.
inline void expect_replays_match_launches(const std::string& path, DType kv_dtype, uint32_t seed,
                                          const std::string& name) {
  SCOPED_TRACE(name);
  const size_t V = size_t(kTinyDecoderVocab);
  unsetenv("ATTNZOO_CUDA_GRAPHS");
  ScenarioSide cpu{load_shuffled(path, Device::cpu(), 3, kv_dtype), {}},
      graphs{load_shuffled(path, Device::cuda(), 5, kv_dtype), {}};
  setenv("ATTNZOO_CUDA_GRAPHS", "0", 1);
  ScenarioSide plain{load_shuffled(path, Device::cuda(), 5, kv_dtype), {}};
  unsetenv("ATTNZOO_CUDA_GRAPHS");
  ScenarioTokens ids(seed);
  std::vector<std::vector<int32_t>> prompts;
  for (int n : {37, 5, 70, 20}) prompts.push_back(ids(n));
  open_sequences({&cpu, &graphs, &plain}, 4);
  const std::vector<size_t> all = {0, 1, 2, 3};
  for (ScenarioSide* side : {&cpu, &graphs, &plain}) side->step(prompts, all, true);

  const int64_t replays_before = cuda_graph_replays_total();
  std::vector<int32_t> next = {1, 2, 3, 4};
  for (int s = 0; s < 40; ++s) {
    const std::vector<size_t> which = s >= 20 && s < 24   ? std::vector<size_t>{1, 3}
                                      : s >= 30 && s < 34 ? std::vector<size_t>{0, 1, 2}
                                                          : all;
    std::vector<std::vector<int32_t>> step_ids;
    for (size_t r : which) step_ids.push_back({next[r]});
    const std::vector<float> c = cpu.step(step_ids, which, false), g = graphs.step(step_ids, which, false),
                             p = plain.step(step_ids, which, false);
    const std::string what = "decode step " + std::to_string(s);
    ASSERT_EQ(g.size(), p.size()) << what;
    if (which.size() != 3) {
      size_t differ = 0;
      for (size_t i = 0; i < g.size(); ++i) differ += g[i] != p[i];
      EXPECT_EQ(differ, 0u) << what << ": logits of the replayed step differ from the launched one's";
    }
    expect_close_logits(c, g, what + " (graphs)");
    expect_close_logits(c, p, what + " (launched)");
    for (size_t i = 0; i < which.size(); ++i) next[which[i]] = int32_t(argmax_logit(c.data() + i * V));
  }
  EXPECT_GT(cuda_graph_replays_total() - replays_before, 10) << "steps replayed from a graph";
}

}  // namespace attnzoo::testing
