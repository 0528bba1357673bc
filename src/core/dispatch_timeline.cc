#include "core/dispatch_timeline.h"

#include <atomic>
#include <chrono>

#include "core/error.h"

namespace attnzoo {
namespace {
thread_local const char* t_op = "";
thread_local std::vector<DispatchRecord>* t_records = nullptr;
std::atomic<bool> g_any_recording{false};
thread_local int64_t t_origin_ns = 0;

int64_t clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

OpLabel::OpLabel(const char* op) : previous_(t_op) { t_op = op; }
OpLabel::~OpLabel() { t_op = previous_; }

DispatchTimeline::DispatchTimeline() {
  bool expected = false;
  if (!g_any_recording.compare_exchange_strong(expected, true))
    throw ArgumentError("timeline: another thread is already recording a dispatch timeline");
  t_records = new std::vector<DispatchRecord>();
  t_records->reserve(4096);
  t_origin_ns = clock_ns();
}

DispatchTimeline::~DispatchTimeline() {
  if (!stopped_) stop();
}

std::vector<DispatchRecord> DispatchTimeline::stop() {
  std::vector<DispatchRecord> out;
  if (stopped_) return out;
  stopped_ = true;
  out = std::move(*t_records);
  delete t_records;
  t_records = nullptr;
  g_any_recording.store(false);
  return out;
}

namespace timeline_detail {
bool recording() { return g_any_recording.load(std::memory_order_relaxed) && t_records != nullptr; }
int64_t now_ns() { return clock_ns() - t_origin_ns; }
void record(int64_t start_ns, int64_t tasks, bool parallel) {
  t_records->push_back({t_op, start_ns, now_ns(), tasks, parallel});
}
}  // namespace timeline_detail

}  // namespace attnzoo
