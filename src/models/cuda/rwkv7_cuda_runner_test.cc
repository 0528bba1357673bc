// RWKV-7 on a GPU (rwkv7_cuda_runner.h) against the same tiny checkpoint on the CPU (testing/tiny_rwkv7.h): a ragged
// prefill batch, decode steps of one token per sequence with the CPU's greedy choice fed to both, a step of three
// tokens per sequence, a prompt that reuses a cached prefix (its state comes back from the prefix's snapshot) and a
// chunk after it, pool slots handed out in shuffled orders on both sides. bf16 and f32 checkpoints (the f32 one
// with LayerNorms without bias and a tied head). Logits agree within bf16 tolerance and greedy tokens are equal
// wherever the CPU's margin is not a near-tie; decode steps replayed from CUDA graphs against the same steps
// launched kernel by kernel. Skipped without a GPU; the host half is
// models/rwkv7_cuda_plan_test.cc, the kernels' emulated cases testing/cuda_emulation/rwkv7_step_cases.cc.
#include "models/cuda/rwkv7_cuda_runner.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "models/cuda/step_graphs.h"
#include "testing/device_test_util.h"
#include "testing/runner_scenario.h"
#include "testing/tiny_rwkv7.h"

namespace attnzoo {
namespace {

using testing::ScratchDir;
using testing::TinyRwkv7;

using testing::ScenarioSide;

// One token for the middle prompt: a prefill of a single token. The pool's element type stays f32 (no paged layer).
// With graphs on (the default), the decode steps of three sequences run in place in the pool's slots, padded to
// four (the pad's state slot -1, which the token shift and the recurrence skip), replayed from the fourth step on.
void run_scenario(const TinyRwkv7& t) {
  ScratchDir dir;
  write_tiny_rwkv7(dir, t);
  unsetenv("ATTNZOO_CUDA_GRAPHS");
  testing::run_cpu_gpu_scenario(dir.str(), "RWKV-7 " + t.dtype, t.seed, DType::f32, 1);
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

// Decode steps replayed from CUDA graphs (step_graphs.h) against the same steps launched kernel by kernel
// (ATTNZOO_CUDA_GRAPHS=0) on identically placed slots: equal bit for bit (the same kernels with the same arguments,
// none of them order-dependent), and both within bf16 tolerance of the CPU. The batch changes shape on the way (two
// sequences, then four again) so that graphs are captured anew and an earlier one is replayed again; steps of three
// sequences are padded to four on the graphs' side (other GEMM shapes than the plain side's: compared with the CPU
// only), and the sequences left out of a step keep their states (their next steps still match the CPU).
TEST(Rwkv7CudaRunner, GraphReplaysMatchStepsLaunchedOneByOne) {
  REQUIRE_GPU();
  ScratchDir dir;
  const TinyRwkv7 t{.seed = 45};
  write_tiny_rwkv7(dir, t);
  const size_t V = size_t(testing::kTinyDecoderVocab);
  auto load = [&](Device device, uint64_t shuffle) {
    return testing::load_shuffled(dir.str(), device, shuffle, DType::f32);
  };
  unsetenv("ATTNZOO_CUDA_GRAPHS");
  ScenarioSide cpu{load(Device::cpu(), 3), {}}, graphs{load(Device::cuda(), 5), {}};
  setenv("ATTNZOO_CUDA_GRAPHS", "0", 1);
  ScenarioSide plain{load(Device::cuda(), 5), {}};
  unsetenv("ATTNZOO_CUDA_GRAPHS");
  testing::ScenarioTokens ids(t.seed);
  std::vector<std::vector<int32_t>> prompts;
  for (int n : {37, 5, 70, 20}) prompts.push_back(ids(n));
  testing::open_sequences({&cpu, &graphs, &plain}, 4);
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
    const std::string what = "RWKV-7 decode step " + std::to_string(s);
    ASSERT_EQ(g.size(), p.size()) << what;
    if (which.size() != 3) {
      size_t differ = 0;
      for (size_t i = 0; i < g.size(); ++i) differ += g[i] != p[i];
      EXPECT_EQ(differ, 0u) << what << ": logits of the replayed step differ from the launched one's";
    }
    testing::expect_close_logits(c, g, what + " (graphs)");
    testing::expect_close_logits(c, p, what + " (launched)");
    for (size_t i = 0; i < which.size(); ++i) next[which[i]] = int32_t(testing::argmax_logit(c.data() + i * V));
  }
  EXPECT_GT(cuda_graph_replays_total() - replays_before, 10) << "steps replayed from a graph";
}

}  // namespace
}  // namespace attnzoo
