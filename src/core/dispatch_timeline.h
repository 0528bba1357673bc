#pragma once
// Where one step's time goes across the pool: while a DispatchTimeline is recording, every top-level
// parallel_for of the recording thread leaves a record (its op label, start, end, task count, whether it ran on
// the workers), so that `attnzoo bench model --timeline` can split a decode step into the jobs the pool ran, the
// serial time between them and the fixed cost per hand-off. Off, the cost is one relaxed load per call.
#include <cstdint>
#include <vector>

namespace attnzoo {

struct DispatchRecord {
  const char* op;  // the innermost OpLabel of the submitting thread ("" where none is set)
  int64_t start_ns, end_ns;  // steady clock, relative to the start of the recording
  int64_t tasks;
  bool parallel;  // handed to worker threads (false: ran serially on the caller)
};

// Labels the jobs a scope submits (a static string: only the pointer is kept).
class OpLabel {
 public:
  explicit OpLabel(const char* op);
  ~OpLabel();
  OpLabel(const OpLabel&) = delete;
  OpLabel& operator=(const OpLabel&) = delete;

 private:
  const char* previous_;
};

// Records the calling thread's top-level jobs from construction until stop() (one recording at a time).
class DispatchTimeline {
 public:
  DispatchTimeline();
  ~DispatchTimeline();
  std::vector<DispatchRecord> stop();
  DispatchTimeline(const DispatchTimeline&) = delete;
  DispatchTimeline& operator=(const DispatchTimeline&) = delete;

 private:
  std::vector<DispatchRecord> records_;  // filled through a pointer of the recording thread
  bool stopped_ = false;
};

namespace timeline_detail {
// Called by ThreadPool::parallel_for around a top-level job; a no-op unless this thread is recording.
bool recording();
int64_t now_ns();
void record(int64_t start_ns, int64_t tasks, bool parallel);
}  // namespace timeline_detail

}  // namespace attnzoo
