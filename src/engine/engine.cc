#include "engine/engine.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "engine/scheduler.h"
#include "models/model.h"

namespace attnzoo {

struct Engine::Shared {
  struct Pending {
    uint64_t id;
    Request request;
    OutputCallback on_output;
    EngineClock::time_point arrival;
  };
  mutable std::mutex mu;
  std::condition_variable cv;
  std::deque<Pending> inbox;
  std::vector<uint64_t> aborts;
  bool stopping = false, stopped = false;
  uint64_t next_id = 1;
  EngineStats stats;  // as of the last step, plus the inbox
  bool published = false;  // the scheduler published stats during this turn of the loop
  std::thread thread;
  std::mutex stop_mu;  // serialises stop() callers
};

Engine::Engine(const Model& model, std::shared_ptr<const tok::Tokenizer> tokenizer, EngineOptions options)
    : model_(model),
      shared_(std::make_unique<Shared>()),
      scheduler_(std::make_unique<Scheduler>(model, std::move(tokenizer), std::move(options))) {
  shared_->stats = scheduler_->stats();
  scheduler_->set_before_outputs([this] {
    const EngineStats st = scheduler_->stats();
    std::lock_guard lock(shared_->mu);
    shared_->stats = st;
    shared_->published = true;
  });
  shared_->thread = std::thread([this] { loop(); });
}

Engine::~Engine() { stop(); }

const EngineOptions& Engine::options() const { return scheduler_->options(); }
int64_t Engine::max_model_len() const { return scheduler_->max_model_len(); }


uint64_t Engine::add_request(Request request, OutputCallback on_output) {
  // The checks read only the options and the pool's fixed sizes, so they are safe on the caller's thread.
  scheduler_->check(request);
  scheduler_->prepare(request);  // the JSON trie, once, here rather than on the scheduler's thread
  uint64_t id;
  {
    std::lock_guard lock(shared_->mu);
    if (shared_->stopping) throw EngineStopped("engine: stopped, no more requests are taken");
    const int64_t cap = scheduler_->options().max_waiting_requests;
    const int64_t waiting = shared_->stats.waiting_requests + int64_t(shared_->inbox.size());
    if (cap > 0 && waiting >= cap)
      throw EngineBusy("engine: " + std::to_string(waiting) + " requests are already waiting (max_waiting_requests " +
                       std::to_string(cap) + ")");
    id = shared_->next_id++;
    shared_->inbox.push_back({id, std::move(request), std::move(on_output), EngineClock::now()});
  }
  shared_->cv.notify_all();
  return id;
}

void Engine::abort(uint64_t request_id) {
  {
    std::lock_guard lock(shared_->mu);
    shared_->aborts.push_back(request_id);
  }
  shared_->cv.notify_all();
}

EngineStats Engine::stats() const {
  std::lock_guard lock(shared_->mu);
  EngineStats s = shared_->stats;
  s.waiting_requests += int64_t(shared_->inbox.size());
  return s;  // as of the last outputs handed out: a client that saw a request end sees its blocks freed
}

void Engine::stop() {
  std::lock_guard stop_lock(shared_->stop_mu);
  {
    std::lock_guard lock(shared_->mu);
    if (shared_->stopped) return;
    shared_->stopping = true;
  }
  shared_->cv.notify_all();
  if (shared_->thread.joinable()) shared_->thread.join();
  std::lock_guard lock(shared_->mu);
  shared_->stopped = true;
}

void Engine::loop() {
  Shared& sh = *shared_;
  for (;;) {
    std::deque<Shared::Pending> inbox;
    std::vector<uint64_t> aborts;
    bool stopping;
    {
      std::unique_lock lock(sh.mu);
      sh.cv.wait(lock, [&] { return sh.stopping || !sh.inbox.empty() || !sh.aborts.empty() || scheduler_->has_work(); });
      inbox.swap(sh.inbox);
      aborts.swap(sh.aborts);
      stopping = sh.stopping;
      sh.published = false;
    }
    for (auto& p : inbox) scheduler_->add(p.id, std::move(p.request), std::move(p.on_output), p.arrival);
    for (uint64_t id : aborts) scheduler_->abort(id);
    if (stopping) {
      scheduler_->abort_all();
    } else if (scheduler_->has_work()) {
      try {
        scheduler_->step();
      } catch (const std::exception&) {
        // The scheduler turns forward and sampling failures into per-request errors; anything else leaves its
        // state unknown, so every request ends rather than the thread dying with requests that never finish.
        scheduler_->abort_all();
      }
    }
    {
      // Steps and aborts publish through the scheduler's hook; only a turn that did neither (new requests that
      // could not start, an unknown abort) needs its numbers taken here.
      std::unique_lock lock(sh.mu);
      if (!sh.published) {
        lock.unlock();
        const EngineStats st = scheduler_->stats();
        lock.lock();
        sh.stats = st;
      }
    }
    if (stopping) return;
  }
}

}  // namespace attnzoo
