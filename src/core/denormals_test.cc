// Flush-to-zero inside kernels: every task of a parallel_for (workers and the calling thread) flushes
// subnormal results, and the caller gets its own floating-point setting back afterwards.
#include "core/denormals.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cfloat>

#include "core/threads.h"

namespace attnzoo {
namespace {

// A product whose exact value (1e-40) is subnormal; volatile keeps the compiler from folding it.
float subnormal_product() {
  volatile float a = 1e-20f, b = 1e-20f;
  return a * b;
}

bool flushing() { return subnormal_product() == 0.f; }

TEST(Denormals, GuardFlushesAndRestores) {
  if (float_env::kFlushBits == 0) GTEST_SKIP() << "no flush-to-zero control on this architecture";
  ASSERT_FALSE(flushing()) << "the test process should start with IEEE subnormals";
  {
    const FlushDenormalsGuard guard;
    EXPECT_TRUE(flushing());
    {
      const FlushDenormalsGuard nested;
      EXPECT_TRUE(flushing());
    }
    EXPECT_TRUE(flushing()) << "an inner guard must not undo an outer one";
  }
  EXPECT_FALSE(flushing());
  EXPECT_GT(subnormal_product(), 0.f);
  EXPECT_LT(subnormal_product(), FLT_MIN);
}

TEST(Denormals, EveryTaskFlushesAndTheCallerIsRestored) {
  if (float_env::kFlushBits == 0) GTEST_SKIP() << "no flush-to-zero control on this architecture";
  ThreadPool pool(3);
  for (int round = 0; round < 3; ++round) {
    std::atomic<int> flushed{0};
    const int64_t tasks = 64;
    pool.parallel_for(tasks, [&](int64_t, int) {
      if (flushing()) flushed.fetch_add(1);
    });
    EXPECT_EQ(flushed.load(), tasks);
    EXPECT_FALSE(flushing()) << "parallel_for left flush-to-zero on in the caller";
  }
  // A single task (run inline on the caller) flushes too.
  bool inline_flushed = false;
  pool.parallel_for(1, [&](int64_t, int) { inline_flushed = flushing(); });
  EXPECT_TRUE(inline_flushed);
  EXPECT_FALSE(flushing());
}

TEST(Denormals, CallerThatAlreadyFlushesKeepsFlushing) {
  if (float_env::kFlushBits == 0) GTEST_SKIP() << "no flush-to-zero control on this architecture";
  const auto before = float_env::read();
  flush_denormals_in_this_thread();
  ThreadPool pool(2);
  pool.parallel_for(8, [](int64_t, int) {});
  EXPECT_TRUE(flushing());
  float_env::write(before);
  EXPECT_FALSE(flushing());
}

}  // namespace
}  // namespace attnzoo
