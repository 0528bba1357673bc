#pragma once
// The one thread pool of the process. Kernels split work into tasks; every other library we call
// (BLAS later) runs single-threaded inside those tasks, so cores are never oversubscribed.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <memory>
#include <stdexcept>
#include <shared_mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace attnzoo {

// A running kernel was cancelled (a pending Ctrl-C seen by the submitting thread, see InterruptScope below); the
// Python module turns it back into the KeyboardInterrupt that caused it. Outputs are left unspecified.
struct Interrupted : std::runtime_error {
  Interrupted() : std::runtime_error("interrupted") {}
};

// A borrowed reference to a callable `void(int64_t task, int worker)`: unlike std::function it never copies the
// callable onto the heap (a lambda capturing more than two references would be), so a dispatch allocates nothing.
// The callable must outlive the call it is passed to, as a parallel_for argument does.
class TaskRef {
 public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, TaskRef>>>
  TaskRef(F&& fn)  // implicit: a lambda converts as it would to std::function
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(fn)))),
        call_([](void* o, int64_t task, int worker) { (*static_cast<std::remove_reference_t<F>*>(o))(task, worker); }) {}
  void operator()(int64_t task, int worker) const { call_(object_, task, worker); }

 private:
  void* object_;
  void (*call_)(void*, int64_t, int);
};

class ThreadPool {
 public:
  // fn(task, worker): task in [0, num_tasks), worker in [0, num_threads()) names per-thread scratch.
  using TaskFn = TaskRef;

  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return int(workers_.size()) + 1; }

  // Runs every task once and returns when all are done. Tasks are claimed dynamically (uneven work, such
  // as causal attention rows, balances itself). A call from inside a task runs serially on that thread.
  void parallel_for(int64_t num_tasks, const TaskFn& fn);

  // Jobs handed to worker threads (parallel_for calls with more than one task, outside a task, on a pool of more
  // than one thread), by any pool, since the process started: each wakes the workers and waits for those that
  // joined it to finish their tasks, the fixed cost a decode step pays per dispatch.
  static uint64_t dispatch_count();

  // The process-wide pool: ATTNZOO_THREADS, else the cores this process may use.
  static ThreadPool& global();
  // Replaces the global pool (CLI --threads, Python set_num_threads). Waits until no `Pin` is held, so a
  // kernel that sized per-thread scratch by num_threads() never runs on a pool of another size. Calling it
  // while this thread holds a Pin is refused (it would wait forever).
  static void set_global_threads(int num_threads);

  // Held for the whole of a call that runs kernels on the global pool (the Python bindings hold one per call):
  // the pool keeps its size until every Pin is gone. Pins on different threads do not exclude each other.
  class Pin {
   public:
    Pin();
    ~Pin();
    Pin(const Pin&) = delete;
    Pin& operator=(const Pin&) = delete;

   private:
    std::shared_lock<std::shared_mutex> lock_;
  };

  // Cancellation. While an InterruptPoll is installed on a thread, every top-level parallel_for that thread
  // submits calls poll() between its own tasks (at most every kPollInterval); when poll() returns true the
  // job's remaining tasks are skipped on every worker and parallel_for throws Interrupted once they are idle.
  // Tasks are never abandoned midway, so no worker outlives the job's data.
  using InterruptPoll = bool (*)();
  static constexpr int kPollIntervalMs = 50;
  class InterruptScope {
   public:
    explicit InterruptScope(InterruptPoll poll);
    ~InterruptScope();
    InterruptScope(const InterruptScope&) = delete;
    InterruptScope& operator=(const InterruptScope&) = delete;

   private:
    InterruptPoll previous_;
  };

 private:
  void worker_loop(int worker);
  void run_tasks(int worker, bool poll);
  void wait_until_done();
  void run_job(int64_t num_tasks, const TaskFn& fn, bool poll);

  // Hand-offs spin before they sleep: a decode step submits hundreds of small jobs a few microseconds apart, and
  // a condition variable's wake-up (a futex call on each side, then the scheduler) costs more than such a job
  // runs. Workers poll `generation_` for kSpinMicros after their last job and only then sleep on `wake_`; the
  // submitter polls `active_` as long before it sleeps on `done_`. `sleepers_` / `submitter_sleeps_` tell the
  // other side whether a notify is needed; both sides use sequentially consistent operations on the flag and
  // the counter they pair with, so a notify is never lost.
  // No spinning where the pool has more threads than the process has CPUs: a spinning worker would then take
  // the core that the thread it waits for needs.
  static constexpr int kSpinMicros = 200;
  int spin_micros_ = kSpinMicros;

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const TaskFn* job_ = nullptr;  // the submitting call's argument, alive until its tasks are done
  int64_t num_tasks_ = 0;
  std::atomic<int64_t> next_task_{0};
  std::atomic<int> active_{0};  // the current job's joined workers still in it, minus kClosed once closed (threads.cc)
  std::atomic<bool> cancelled_{false};
  std::atomic<uint64_t> generation_{0};  // bumped once per job, after its fields are written
  std::atomic<int> sleepers_{0};
  std::atomic<bool> submitter_sleeps_{false};
  std::atomic<bool> stop_{false};
};

int default_thread_count();

}  // namespace attnzoo
