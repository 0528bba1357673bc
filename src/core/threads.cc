#include "core/threads.h"

#include <sched.h>

#include <chrono>
#include <optional>
#include <cstdlib>
#include <memory>
#include <string>

#include "core/denormals.h"
#include "core/dispatch_timeline.h"
#include "core/error.h"
#include "core/thread_limits.h"

namespace attnzoo {
namespace {
thread_local bool t_inside_task = false;
thread_local int t_pins = 0;
thread_local ThreadPool::InterruptPoll t_poll = nullptr;
thread_local const std::atomic<bool>* t_cancelled = nullptr;  // the cancel flag of the job this thread runs
std::unique_ptr<ThreadPool> g_pool;
std::atomic<ThreadPool*> g_pool_ptr{nullptr};  // g_pool.get(), read without the lock
std::mutex g_pool_mutex;
std::shared_mutex g_resize_mutex;  // shared: a Pin; exclusive: set_global_threads
// Resizes waiting for g_resize_mutex. The shared mutex prefers readers, so kernels called back to back from two
// threads (whose pins always overlap) could starve a resize for seconds; a new outermost Pin waits while one is
// pending instead.
std::atomic<int> g_resizes_pending{0};
std::mutex g_pending_mutex;
std::condition_variable g_pending_done;
std::atomic<uint64_t> g_dispatches{0};

// Rate-limits the poll: it may take the Python GIL, which must stay rare next to the kernel's work.
class PollClock {
 public:
  bool due() {
    const auto now = std::chrono::steady_clock::now();
    if (now < next_) return false;
    next_ = now + std::chrono::milliseconds(ThreadPool::kPollIntervalMs);
    return true;
  }

 private:
  std::chrono::steady_clock::time_point next_ =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(ThreadPool::kPollIntervalMs);
};
// Marks this thread as running tasks of the job whose cancel flag is `cancelled`, until the scope ends (also
// when a task throws, so the next call from this thread is top level again).
class InsideTask {
 public:
  explicit InsideTask(const std::atomic<bool>* cancelled) : was_inside_(t_inside_task), previous_(t_cancelled) {
    t_inside_task = true;
    t_cancelled = cancelled;
  }
  ~InsideTask() {
    t_inside_task = was_inside_;
    t_cancelled = previous_;
  }
  InsideTask(const InsideTask&) = delete;
  InsideTask& operator=(const InsideTask&) = delete;

 private:
  bool was_inside_;
  const std::atomic<bool>* previous_;
};
}  // namespace

ThreadPool::Pin::Pin() {
  // A thread already holding a pin takes another at once: the pending resize waits for its first one anyway.
  while (t_pins == 0 && g_resizes_pending.load() > 0) {
    std::unique_lock<std::mutex> wait(g_pending_mutex);
    g_pending_done.wait(wait, [] { return g_resizes_pending.load() == 0; });
  }
  lock_ = std::shared_lock<std::shared_mutex>(g_resize_mutex);
  ++t_pins;
}
ThreadPool::Pin::~Pin() { --t_pins; }

ThreadPool::InterruptScope::InterruptScope(InterruptPoll poll) : previous_(t_poll) { t_poll = poll; }
ThreadPool::InterruptScope::~InterruptScope() { t_poll = previous_; }

namespace {
// The CPUs this process may run on.
int available_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return int(std::max(1u, std::thread::hardware_concurrency()));
}
}  // namespace

int default_thread_count() {
  if (const char* env = std::getenv("ATTNZOO_THREADS")) {
    char* end = nullptr;
    long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && n >= 1 && n <= kMaxThreads) return int(n);
    throw ArgumentError(std::string("ATTNZOO_THREADS: expected an integer in [1, ") + std::to_string(kMaxThreads) +
                        "], got '" + env + "'");
  }
  return available_cpus();
}

ThreadPool::ThreadPool(int num_threads) {
  require(num_threads >= 1, "num_threads", "must be at least 1, got " + std::to_string(num_threads));
  if (num_threads > available_cpus()) spin_micros_ = 0;
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_tasks(int worker, bool poll) {
  const InsideTask inside(&cancelled_);
  std::optional<PollClock> clock;  // read the clock only where a poll is installed
  if (poll) clock.emplace();
  for (;;) {
    if (cancelled_.load(std::memory_order_relaxed)) break;
    int64_t task = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (task >= num_tasks_) break;
    (*job_)(task, worker);
    if (poll && clock->due() && t_poll()) cancelled_.store(true, std::memory_order_relaxed);
  }
}

uint64_t ThreadPool::dispatch_count() { return g_dispatches.load(std::memory_order_relaxed); }

namespace {

// `active_` during a job: the workers that joined it and still run its tasks, or that count minus kClosed once the
// submitter has run out of tasks. A worker joins only while the job is open, so the submitter then waits for the
// workers already inside, never for one that has yet to be scheduled or woken: on a loaded machine (or when a
// worker sleeps past its spin) the submitter that ran every task itself returns at once instead of waiting
// milliseconds for a thread that would find nothing left to do.
constexpr int kClosed = 1 << 30;

// Polls `ready` for about ThreadPool::kSpinMicros; true as soon as it holds. The clock is read every 64 pauses;
// a yield every round leaves the core to a runnable thread of this process when threads outnumber cores.
template <class Ready>
bool spin_until(Ready ready, int micros) {
  if (micros <= 0) return ready();
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(micros);
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    if (std::chrono::steady_clock::now() >= until) return ready();
    std::this_thread::yield();
  }
}

}  // namespace

void ThreadPool::worker_loop(int worker) {
  flush_denormals_in_this_thread();
  uint64_t seen = 0;
  for (;;) {
    auto ready = [&] { return stop_.load(std::memory_order_acquire) || generation_.load() != seen; };
    if (!spin_until(ready, spin_micros_)) {
      std::unique_lock<std::mutex> lock(mutex_);
      sleepers_.fetch_add(1);  // seq_cst, before the predicate's seq_cst load of generation_
      wake_.wait(lock, ready);
      sleepers_.fetch_sub(1);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    // Join while the job is open (the acquire pairs with run_job's release store that opened it, after its fields
    // were written: a worker that woke for an earlier job and joins this one reads this one's fields). A closed job
    // has no task left: skip it and wait for the next generation.
    int in = active_.load(std::memory_order_acquire);
    while (in >= 0 && !active_.compare_exchange_weak(in, in + 1, std::memory_order_acquire)) {
    }
    if (in < 0) continue;
    run_tasks(worker, false);
    if (active_.fetch_sub(1) == 1 - kClosed && submitter_sleeps_.load()) {
      std::lock_guard<std::mutex> lock(mutex_);  // the submitter is in done_.wait or about to test active_
      done_.notify_one();
    }
  }
}

void ThreadPool::wait_until_done() {
  active_.fetch_sub(kClosed);  // seq_cst: no worker joins after this; those inside finish and leave
  auto done = [&] { return active_.load() == -kClosed; };
  if (spin_until(done, spin_micros_)) return;
  std::unique_lock<std::mutex> lock(mutex_);
  submitter_sleeps_.store(true);  // seq_cst, before the predicate's load of active_
  done_.wait(lock, done);
  submitter_sleeps_.store(false);
}

void ThreadPool::parallel_for(int64_t num_tasks, const TaskFn& fn) {
  if (num_tasks <= 0) return;
  // The caller's own setting comes back when the tasks are done. Inside a task the thread already flushes (workers
  // from their start, the caller under its outer guard): nested loops on the decode path skip the MXCSR round trip.
  std::optional<FlushDenormalsGuard> flush;
  if (!t_inside_task) flush.emplace();
  // Only the outermost call of the submitting thread polls and throws: a task must never be left by an
  // exception while other workers still run the job.
  const bool top_level = !t_inside_task;
  const bool poll = top_level && t_poll != nullptr;
  if (top_level && timeline_detail::recording()) {
    const int64_t start = timeline_detail::now_ns();
    const bool parallel = !workers_.empty() && num_tasks > 1;  // run_job's condition for a hand-off, at top level
    run_job(num_tasks, fn, poll);
    timeline_detail::record(start, num_tasks, parallel);
    return;
  }
  run_job(num_tasks, fn, poll);
}

void ThreadPool::run_job(int64_t num_tasks, const TaskFn& fn, bool poll) {
  const bool top_level = !t_inside_task;
  if (t_inside_task || workers_.empty() || num_tasks == 1) {
    // A serial job of its own has its own cancel flag: the pool's belongs to whichever job the workers run,
    // possibly another thread's. A nested loop skips its rest when its enclosing job is cancelled.
    std::atomic<bool> own{false};
    const InsideTask inside(top_level ? &own : t_cancelled);
    std::optional<PollClock> clock;
    if (poll) clock.emplace();
    for (int64_t i = 0; i < num_tasks; ++i) {
      if (t_cancelled->load(std::memory_order_relaxed)) break;
      fn(i, 0);
      if (poll && clock->due() && t_poll()) own.store(true, std::memory_order_relaxed);
    }
    if (top_level && own.load(std::memory_order_relaxed)) throw Interrupted();
    return;
  }
  // One job at a time: concurrent callers (e.g. two Python threads) queue here.
  static std::mutex submit_mutex;
  std::lock_guard<std::mutex> submit(submit_mutex);
  // The previous job is closed and every worker that joined it has left, so the fields are ours until active_
  // opens this one.
  job_ = &fn;
  num_tasks_ = num_tasks;
  next_task_.store(0, std::memory_order_relaxed);
  cancelled_.store(false, std::memory_order_relaxed);
  active_.store(0, std::memory_order_release);  // open: workers may join (the fields above are theirs to read)
  generation_.fetch_add(1);  // seq_cst: publishes the fields, and orders before the load of sleepers_
  g_dispatches.fetch_add(1, std::memory_order_relaxed);
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(mutex_);  // a worker between its predicate test and its wait still wakes
    wake_.notify_all();
  }
  run_tasks(0, poll);
  wait_until_done();
  job_ = nullptr;
  if (cancelled_.load(std::memory_order_relaxed)) {
    cancelled_.store(false, std::memory_order_relaxed);
    throw Interrupted();
  }
}

ThreadPool& ThreadPool::global() {
  // Read on every kernel call of a decode step: the lock is taken only to create or replace the pool.
  if (ThreadPool* pool = g_pool_ptr.load(std::memory_order_acquire)) return *pool;
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  if (!g_pool) {
    g_pool = std::make_unique<ThreadPool>(default_thread_count());
    g_pool_ptr.store(g_pool.get(), std::memory_order_release);
  }
  return *g_pool;
}

void ThreadPool::set_global_threads(int num_threads) {
  require(num_threads >= 1 && num_threads <= kMaxThreads, "num_threads",
          "must be in [1, " + std::to_string(kMaxThreads) + "]");
  require(t_pins == 0, "num_threads", "cannot change while this thread runs a kernel");
  g_resizes_pending.fetch_add(1);
  struct Done {
    ~Done() {
      {
        std::lock_guard<std::mutex> lock(g_pending_mutex);
        g_resizes_pending.fetch_sub(1);
      }
      g_pending_done.notify_all();
    }
  } done;
  std::unique_lock<std::shared_mutex> resize(g_resize_mutex);
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  g_pool_ptr.store(nullptr, std::memory_order_release);
  g_pool.reset();
  g_pool = std::make_unique<ThreadPool>(num_threads);
  g_pool_ptr.store(g_pool.get(), std::memory_order_release);
}

}  // namespace attnzoo
