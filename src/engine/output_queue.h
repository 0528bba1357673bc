#pragma once
// The hand-over between the engine thread and a consumer (an HTTP handler, Python, a test): the engine pushes
// a request's outputs without ever waiting on the consumer, and the consumer waits with a timeout, so it can
// notice a client that went away between outputs and abort the request.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>

#include "engine/request.h"

namespace attnzoo {

class OutputQueue : public std::enable_shared_from_this<OutputQueue> {
 public:
  static std::shared_ptr<OutputQueue> make() { return std::shared_ptr<OutputQueue>(new OutputQueue()); }

  // The callback to give Engine::add_request: pushes into this queue (keeps the queue alive).
  OutputCallback callback() {
    return [self = shared_from_this()](RequestOutput&& out) { self->push(std::move(out)); };
  }
  void push(RequestOutput&& out) {
    {
      std::lock_guard lock(mu_);
      if (out.finished) finished_ = true;
      items_.push_back(std::move(out));
    }
    cv_.notify_all();
  }
  // The next output, or nullopt after `timeout` without one.
  std::optional<RequestOutput> pop(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return !items_.empty(); })) return std::nullopt;
    RequestOutput out = std::move(items_.front());
    items_.pop_front();
    return out;
  }
  std::optional<RequestOutput> try_pop() { return pop(std::chrono::milliseconds(0)); }
  // The request's last output has been pushed (it may still be waiting in the queue).
  bool finished() const {
    std::lock_guard lock(mu_);
    return finished_;
  }

 private:
  OutputQueue() = default;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestOutput> items_;
  bool finished_ = false;
};

}  // namespace attnzoo
