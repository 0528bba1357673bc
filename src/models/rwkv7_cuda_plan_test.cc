// The host half of RWKV-7's GPU runner (models/cuda/rwkv7_cuda_plan.h): what it covers passes the checks before
// any upload (the tiny checkpoints the GPU test runs, whatever the pool's KV dtype: RWKV-7 keeps none), and what it
// does not is refused by name. The GPU half is models/cuda/rwkv7_cuda_runner_test.cc.
#include "models/cuda/rwkv7_cuda_plan.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "models/model.h"
#include "testing/tiny_rwkv7.h"

namespace attnzoo {
namespace {

using testing::ScratchDir;
using testing::TinyRwkv7;

std::unique_ptr<Model> load_tiny(const ScratchDir& dir, const TinyRwkv7& t) {
  write_tiny_rwkv7(dir, t);
  return Model::load(dir.str());
}

const Rwkv7Model& rwkv7(const Model& m) {
  const auto* r = dynamic_cast<const Rwkv7Model*>(&m);
  EXPECT_NE(r, nullptr) << m.info().architecture << " did not build an Rwkv7Model";
  return *r;
}

TEST(Rwkv7CudaPlan, TheTinyCheckpointsPass) {
  for (const TinyRwkv7& t : {TinyRwkv7{}, TinyRwkv7{.dtype = "F32", .norm_bias = false, .tied = true},
                             TinyRwkv7{.heads = 1, .head_dim = 256}}) {
    ScratchDir dir;
    const std::unique_ptr<Model> m = load_tiny(dir, t);
    EXPECT_NO_THROW(check_rwkv7_runs_on_cuda(rwkv7(*m))) << t.dtype << " head_dim " << t.head_dim;
  }
}

TEST(Rwkv7CudaPlan, HeadsWiderThanTheRecurrenceAreRefusedByName) {
  ScratchDir dir;
  const std::unique_ptr<Model> m = load_tiny(dir, TinyRwkv7{.heads = 1, .head_dim = 320});
  try {
    check_rwkv7_runs_on_cuda(rwkv7(*m));
    FAIL() << "head_dim 320 accepted";
  } catch (const ArgumentError& e) {
    EXPECT_STREQ(e.what(),
                 "device: RWKV-7 head_dim 320 (the CUDA recurrence takes up to 256) (RWKV7ForCausalLM, layer 0) runs "
                 "on the CPU only so far");
  }
}

}  // namespace
}  // namespace attnzoo
