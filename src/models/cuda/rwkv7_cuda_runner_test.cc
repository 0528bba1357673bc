// RWKV-7 on a GPU (rwkv7_cuda_runner.h) against the same tiny checkpoint on the CPU (testing/tiny_rwkv7.h): a ragged
// prefill batch, decode steps of one token per sequence with the CPU's greedy choice fed to both, a step of three
// tokens per sequence, a prompt that reuses a cached prefix (its state comes back from the prefix's snapshot) and a
// chunk after it, pool slots handed out in shuffled orders on both sides. bf16 and f32 checkpoints (the f32 one
// with LayerNorms without bias and a tied head). Logits agree within bf16 tolerance and greedy tokens are equal
// wherever the CPU's margin is not a near-tie. Skipped without a GPU; the host half is
// models/rwkv7_cuda_plan_test.cc, the kernels' emulated cases testing/cuda_emulation/rwkv7_step_cases.cc.
#include "models/cuda/rwkv7_cuda_runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "models/model.h"
#include "testing/device_test_util.h"
#include "testing/tiny_rwkv7.h"

namespace attnzoo {
namespace {

using testing::ScratchDir;
using testing::TinyRwkv7;

constexpr int64_t V = testing::kTinyDecoderVocab;

std::unique_ptr<Model> load(const std::string& path, Device device, uint64_t shuffle_seed) {
  LoadOptions o;
  o.pool.device = device;
  o.pool.bytes = 32 << 20;
  o.pool.shuffle_seed = shuffle_seed;
  return Model::load(path, o);
}

int64_t argmax(const float* row) { return std::max_element(row, row + V) - row; }

void expect_close(const std::vector<float>& cpu, const std::vector<float>& gpu, const std::string& what) {
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  float scale = 0.f, worst = 0.f;
  for (size_t i = 0; i < cpu.size(); ++i) {
    scale = std::max(scale, std::abs(cpu[i]));
    worst = std::max(worst, std::abs(cpu[i] - gpu[i]));
  }
  const float tol = 0.03f * scale + 0.02f;
  EXPECT_LE(worst, tol) << what << ": largest logit " << scale;
  for (size_t r = 0; r < cpu.size() / size_t(V); ++r) {
    const float* c = cpu.data() + r * size_t(V);
    std::vector<float> sorted(c, c + V);
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    if (sorted[0] - sorted[1] > 2 * tol)
      EXPECT_EQ(argmax(c), argmax(gpu.data() + r * size_t(V))) << what << " row " << r;
  }
}

struct Side {
  std::unique_ptr<Model> model;
  std::vector<std::unique_ptr<Sequence>> seqs;

  std::vector<float> step(const std::vector<std::vector<int32_t>>& ids, const std::vector<size_t>& which,
                          bool last_only) {
    Batch b;
    for (size_t i = 0; i < which.size(); ++i) b.add(*seqs[which[i]], ids[i]);
    return model->forward(b, last_only);
  }
};

void run_scenario(const TinyRwkv7& t) {
  ScratchDir dir;
  write_tiny_rwkv7(dir, t);
  const std::string name = "RWKV-7 " + t.dtype;
  Side cpu{load(dir.str(), Device::cpu(), 3), {}}, gpu{load(dir.str(), Device::cuda(), 5), {}};
  std::mt19937 rng(t.seed);
  std::uniform_int_distribution<int32_t> token(0, int32_t(V) - 1);
  auto ids = [&](int n) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (auto& x : v) x = token(rng);
    return v;
  };
  for (int i = 0; i < 4; ++i) {
    cpu.seqs.push_back(cpu.model->new_sequence());
    gpu.seqs.push_back(gpu.model->new_sequence());
  }
  const std::vector<std::vector<int32_t>> prompts = {ids(37), ids(1), ids(70)};
  expect_close(cpu.step(prompts, {0, 1, 2}, false), gpu.step(prompts, {0, 1, 2}, false), name + " prefill");
  std::vector<int32_t> next = {1, 2, 3};
  for (int s = 0; s < 6; ++s) {
    std::vector<std::vector<int32_t>> step_ids;
    for (int32_t id : next) step_ids.push_back({id});
    const std::vector<float> c = cpu.step(step_ids, {0, 1, 2}, false);
    expect_close(c, gpu.step(step_ids, {0, 1, 2}, false), name + " decode step " + std::to_string(s));
    for (size_t r = 0; r < 3; ++r) next[r] = int32_t(argmax(c.data() + r * size_t(V)));
  }
  const std::vector<std::vector<int32_t>> three = {ids(3), ids(3)};
  expect_close(cpu.step(three, {0, 2}, false), gpu.step(three, {0, 2}, false), name + " three tokens each");
  std::vector<int32_t> shared = prompts[0];
  for (int32_t id : ids(12)) shared.push_back(id);
  expect_close(cpu.step({shared}, {3}, true), gpu.step({shared}, {3}, true), name + " prefix reuse");
  const std::vector<std::vector<int32_t>> chunk = {ids(19)};
  expect_close(cpu.step(chunk, {3}, false), gpu.step(chunk, {3}, false), name + " chunk after a prefix");
}

TEST(Rwkv7CudaRunner, ABf16CheckpointMatchesTheCpu) {
  REQUIRE_GPU();
  run_scenario(TinyRwkv7{});
}

TEST(Rwkv7CudaRunner, AnF32CheckpointWithoutNormBiasesAndATiedHeadMatchesTheCpu) {
  REQUIRE_GPU();
  run_scenario(TinyRwkv7{.dtype = "F32", .norm_bias = false, .tied = true, .seed = 43});
}

// Heads of 128 (K over four warps in the recurrence, V over four 32-column slices).
TEST(Rwkv7CudaRunner, WideHeadsMatchTheCpu) {
  REQUIRE_GPU();
  run_scenario(TinyRwkv7{.seed = 44, .heads = 1, .head_dim = 128});
}

}  // namespace
}  // namespace attnzoo
