#include "core/dispatch_timeline.h"

#include <atomic>
#include <chrono>

#include "core/error.h"

namespace attnzoo {
namespace {
thread_local const char* t_op = "";
thread_local char t_thread_marker;  // its address names the thread
std::atomic<const char*> g_recording_thread{nullptr};  // the marker of the thread recording, if any
std::vector<DispatchRecord>* g_records = nullptr;  // written only by that thread while it records
thread_local int64_t t_origin_ns = 0;

int64_t clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

OpLabel::OpLabel(const char* op) : previous_(t_op) { t_op = op; }
OpLabel::~OpLabel() { t_op = previous_; }

DispatchTimeline::DispatchTimeline() {
  const char* none = nullptr;
  if (!g_recording_thread.compare_exchange_strong(none, &t_thread_marker))
    throw ArgumentError("timeline: another thread is already recording a dispatch timeline");
  // Only this thread records, and not before the constructor returns.
  records_.reserve(4096);
  g_records = &records_;
  t_origin_ns = clock_ns();
}

DispatchTimeline::~DispatchTimeline() { stop(); }

std::vector<DispatchRecord> DispatchTimeline::stop() {
  if (stopped_) return {};
  stopped_ = true;
  g_recording_thread.store(nullptr);  // the recording thread stops writing, on whichever thread this runs
  return std::move(records_);
}

namespace timeline_detail {
bool recording() { return g_recording_thread.load(std::memory_order_acquire) == &t_thread_marker; }
int64_t now_ns() { return clock_ns() - t_origin_ns; }
void record(int64_t start_ns, int64_t tasks, bool parallel) {
  g_records->push_back({t_op, start_ns, now_ns(), tasks, parallel});
}
}  // namespace timeline_detail

}  // namespace attnzoo
