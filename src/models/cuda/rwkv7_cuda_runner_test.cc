// RWKV-7 on a GPU (rwkv7_cuda_runner.h) against the same tiny checkpoint on the CPU (testing/tiny_rwkv7.h): a ragged
// prefill batch (37, 1 and 70 tokens: the chunked form), decode steps of one token per sequence with the CPU's greedy choice fed to both, a step of three
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

#include "testing/device_test_util.h"
#include "testing/runner_scenario.h"
#include "testing/tiny_rwkv7.h"

namespace attnzoo {
namespace {

using testing::ScratchDir;
using testing::TinyRwkv7;

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

// testing::expect_replays_match_launches: decode steps replayed from CUDA graphs equal bit for bit to the same steps
// launched kernel by kernel, both within bf16 tolerance of the CPU; the sequences left out of a step keep their
// states in their slots (their next steps still match the CPU).
TEST(Rwkv7CudaRunner, GraphReplaysMatchStepsLaunchedOneByOne) {
  REQUIRE_GPU();
  ScratchDir dir;
  const TinyRwkv7 t{.seed = 45};
  write_tiny_rwkv7(dir, t);
  testing::expect_replays_match_launches(dir.str(), DType::f32, t.seed, "RWKV-7");
}

}  // namespace
}  // namespace attnzoo
