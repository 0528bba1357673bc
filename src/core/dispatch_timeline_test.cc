// The dispatch timeline records the recording thread's top-level jobs with their labels, and nothing else:
// not nested loops (they run inside a task), not other threads' jobs, nothing once stopped.
#include "core/dispatch_timeline.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "core/threads.h"

namespace attnzoo {
namespace {

TEST(DispatchTimeline, RecordsTopLevelJobsWithTheirLabels) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  DispatchTimeline timeline;
  {
    const OpLabel outer("outer");
    pool.parallel_for(8, [&](int64_t i, int) {
      pool.parallel_for(4, [&](int64_t j, int) { sum += j; });  // nested: serial, not recorded
      sum += i;
    });
    const OpLabel inner("inner");
    pool.parallel_for(1, [&](int64_t, int) { sum += 100; });
  }
  std::thread other([&] { pool.parallel_for(3, [&](int64_t, int) { sum += 1; }); });
  other.join();
  const auto records = timeline.stop();
  ASSERT_EQ(records.size(), 2u);
  EXPECT_STREQ(records[0].op, "outer");
  EXPECT_EQ(records[0].tasks, 8);
  EXPECT_TRUE(records[0].parallel);
  EXPECT_STREQ(records[1].op, "inner");
  EXPECT_FALSE(records[1].parallel);  // one task runs on the caller
  for (const auto& r : records) EXPECT_LE(r.start_ns, r.end_ns);
  EXPECT_LE(records[0].end_ns, records[1].start_ns);
  EXPECT_EQ(sum.load(), 8 * 6 + 28 + 100 + 3);
  pool.parallel_for(2, [&](int64_t, int) {});
  EXPECT_TRUE(timeline.stop().empty());
}

TEST(DispatchTimeline, OneRecordingAtATime) {
  DispatchTimeline first;
  EXPECT_THROW(DispatchTimeline second, ArgumentError);
}

// Thousands of back-to-back small jobs, some submitted after a pause long enough for the workers to fall asleep:
// every task runs exactly once whether the hand-off found them spinning or sleeping.
TEST(ThreadPool, BackToBackJobsAcrossSpinAndSleep) {
  ThreadPool pool(3);
  std::atomic<int64_t> done{0};
  int64_t expected = 0;
  for (int job = 0; job < 3000; ++job) {
    const int64_t tasks = 1 + job % 5;
    pool.parallel_for(tasks, [&](int64_t, int) { done++; });
    expected += tasks;
    if (job % 500 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(done.load(), expected);
}

}  // namespace
}  // namespace attnzoo
