// The pool's contracts under concurrency: resizing waits for pinned calls (so a kernel that sized scratch by
// num_threads() never runs on a pool of another size), and an interrupt poll cancels a job between tasks with
// every task either run whole or skipped.
#include "core/threads.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "core/error.h"

namespace attnzoo {
namespace {

TEST(ThreadPool, ResizeWaitsForPinnedCalls) {
  ThreadPool::set_global_threads(2);
  std::atomic<bool> pinned{false}, release{false}, resized{false};
  std::atomic<int> size_seen_at_end{0};
  std::thread kernel([&] {
    ThreadPool::Pin pin;
    const int size = ThreadPool::global().num_threads();
    pinned = true;
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    // A real kernel would now index scratch sized `size` by the worker number.
    std::unique_ptr<std::atomic<int>[]> per_worker(new std::atomic<int>[size_t(size)]{});
    std::atomic<int> outside{0};
    ThreadPool::global().parallel_for(64, [&](int64_t, int w) { (w < size ? per_worker[size_t(w)] : outside)++; });
    EXPECT_EQ(outside.load(), 0);
    size_seen_at_end = ThreadPool::global().num_threads();
  });
  while (!pinned) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::thread resizer([&] {
    ThreadPool::set_global_threads(4);
    resized = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(resized) << "the pool was replaced under a pinned call";
  release = true;
  kernel.join();
  resizer.join();
  EXPECT_EQ(size_seen_at_end, 2);
  EXPECT_EQ(ThreadPool::global().num_threads(), 4);
  ThreadPool::set_global_threads(default_thread_count());
}

TEST(ThreadPool, ResizeFromInsideAPinnedCallIsRefused) {
  ThreadPool::Pin pin;
  EXPECT_THROW(ThreadPool::set_global_threads(3), ArgumentError);
}

bool always_interrupt() { return true; }

TEST(ThreadPool, InterruptCancelsBetweenTasksAndThrows) {
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    std::atomic<int64_t> done{0};
    const int64_t tasks = 100000;
    ThreadPool::InterruptScope scope(always_interrupt);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_THROW(pool.parallel_for(tasks,
                                   [&](int64_t, int) {
                                     std::this_thread::sleep_for(std::chrono::microseconds(100));
                                     done++;
                                   }),
                 Interrupted);
    // Tasks take 100 us: the whole job is >= 10 s over 3 threads; the poll comes after kPollIntervalMs.
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3)) << threads << " threads";
    EXPECT_LT(done.load(), tasks);
    // The pool runs the next job in full.
    done = 0;
    ThreadPool::InterruptScope off(nullptr);
    pool.parallel_for(1000, [&](int64_t, int) { done++; });
    EXPECT_EQ(done.load(), 1000);
  }
}

TEST(ThreadPool, NestedLoopsNeverThrowInsideTasks) {
  ThreadPool pool(2);
  ThreadPool::InterruptScope scope(always_interrupt);
  std::atomic<int> inner_throws{0};
  EXPECT_THROW(pool.parallel_for(200,
                                 [&](int64_t, int) {
                                   try {
                                     pool.parallel_for(4, [&](int64_t, int) {
                                       std::this_thread::sleep_for(std::chrono::milliseconds(2));
                                     });
                                   } catch (...) {
                                     inner_throws++;
                                   }
                                 }),
               Interrupted);
  EXPECT_EQ(inner_throws.load(), 0);
}

// Workers join a job only while it is open, and the submitter closes it once no task is left: a worker that wakes
// late (more threads than CPUs on any machine, so they sleep instead of spinning) finds the job closed and must
// neither run its tasks nor be waited for. Two submitters back to back, thousands of short jobs: every task exactly
// once, on a worker index in range, and only while its own job is running.
TEST(ThreadPool, LateWorkersNeverRunAClosedJob) {
  ThreadPool pool(int(std::thread::hardware_concurrency()) + 2);
  std::atomic<int> misplaced{0};
  auto submitter = [&](int seed) {
    std::vector<std::atomic<int>> runs(16);
    for (int job = 0; job < 4000; ++job) {
      const int64_t n = 1 + (job * 7 + seed) % 13;
      for (int64_t i = 0; i < n; ++i) runs[size_t(i)].store(0);
      std::atomic<bool> returned{false};
      pool.parallel_for(n, [&](int64_t task, int worker) {
        if (returned.load() || worker < 0 || worker >= pool.num_threads()) misplaced++;
        runs[size_t(task)]++;
        if ((task + job) % 5 == 0) std::this_thread::yield();
      });
      returned.store(true);
      for (int64_t i = 0; i < n; ++i)
        if (runs[size_t(i)].load() != 1) misplaced++;
    }
  };
  std::thread other(submitter, 3);
  submitter(0);
  other.join();
  EXPECT_EQ(misplaced.load(), 0);
}

// A serial job (one task, or a one-thread pool) has its own cancel flag: a pool job of another thread being
// cancelled at the same time must not skip its tasks (that would hand back a torn result without an error).
TEST(ThreadPool, AnotherThreadsCancelledJobNeverCutsASerialJobShort) {
  ThreadPool pool(3);
  std::atomic<bool> cancelling{false}, stop{false};
  std::thread interrupted([&] {
    ThreadPool::InterruptScope scope(always_interrupt);
    while (!stop) {
      try {
        pool.parallel_for(1000, [&](int64_t, int) {
          cancelling = true;
          std::this_thread::sleep_for(std::chrono::milliseconds(2));  // a wide window while cancelled
        });
      } catch (const Interrupted&) {
      }
    }
  });
  while (!cancelling) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  for (int round = 0; round < 200; ++round) {
    int64_t done = 0;
    pool.parallel_for(1, [&](int64_t, int) {
      // The one task runs inline and holds nested loops: every inner task must run.
      pool.parallel_for(50, [&](int64_t, int) {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
        ++done;
      });
    });
    ASSERT_EQ(done, 50) << "round " << round;
  }
  stop = true;
  interrupted.join();
}

// A task that throws out of a serial job leaves the thread top level again: its next job still polls and throws.
TEST(ThreadPool, AThrowingSerialTaskLeavesTheThreadTopLevel) {
  ThreadPool pool(1);
  EXPECT_THROW(pool.parallel_for(3, [](int64_t, int) { throw ArgumentError("x: thrown by a task"); }), ArgumentError);
  ThreadPool::InterruptScope scope(always_interrupt);
  EXPECT_THROW(pool.parallel_for(100000,
                                 [](int64_t, int) { std::this_thread::sleep_for(std::chrono::microseconds(100)); }),
               Interrupted);
}

}  // namespace
}  // namespace attnzoo
