#pragma once
// The one thread pool of the process. Kernels split work into tasks; every other library we call
// (BLAS later) runs single-threaded inside those tasks, so cores are never oversubscribed.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace attnzoo {

class ThreadPool {
 public:
  // fn(task, worker): task in [0, num_tasks), worker in [0, num_threads()) names per-thread scratch.
  using TaskFn = std::function<void(int64_t task, int worker)>;

  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return int(workers_.size()) + 1; }

  // Runs every task once and returns when all are done. Tasks are claimed dynamically (uneven work, such
  // as causal attention rows, balances itself). A call from inside a task runs serially on that thread.
  void parallel_for(int64_t num_tasks, const TaskFn& fn);

  // The process-wide pool: ATTNZOO_THREADS, else the cores this process may use.
  static ThreadPool& global();
  // Replaces the global pool (CLI --threads, Python set_num_threads). Not safe while kernels run.
  static void set_global_threads(int num_threads);

 private:
  void worker_loop(int worker);
  void run_tasks(int worker);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const TaskFn* job_ = nullptr;
  int64_t num_tasks_ = 0;
  std::atomic<int64_t> next_task_{0};
  int active_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

int default_thread_count();

}  // namespace attnzoo
