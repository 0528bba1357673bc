#pragma once
// CUDA graphs of a model's decode steps: a step whose launches are exactly those of an earlier one (the same
// batch shape, attention plans, buffer and pool addresses; a caller-built `signature` says so) is replayed from
// a graph instead of launched kernel by kernel, which saves the per-launch and per-layer host work of a step
// (hundreds of launches for a small model, where they cost more than the weights take to read). The step's
// metadata (tokens, positions, slots, the decode plans' work lists) is copied into the same device buffer before
// each replay, so a replay computes the new step. A signature is captured the second time it comes in a row (the
// first run grows the buffers), replayed after; a change of any buffer's address changes the signature, and
// graphs whose buffers moved are dropped. ATTNZOO_CUDA_GRAPHS=0 turns replay off; a capture that fails turns it
// off for the runner, with one notice, and the step runs kernel by kernel.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"

namespace attnzoo {

class StepGraphs {
 public:
  StepGraphs(Device device, bool enabled);
  ~StepGraphs();
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;

  bool enabled() const { return enabled_; }
  // The step's launches, enqueued by `launch` on the stream it is given: replayed, captured and run, or run,
  // after the work on `caller` so far; `caller` waits for them before returning. CUDA builds only.
  void run(const std::vector<uint64_t>& signature, const std::function<void(Stream)>& launch, Stream caller);
  // Graphs replayed, and captured, so far (tests and benches).
  int64_t replays() const { return replays_; }
  int64_t captures() const { return captures_; }

 private:
  struct Graph;
  // Captures the step and launches the graph; false (failure_ says why, the step not run) when the capture or
  // its instantiation fails.
  bool capture(const std::vector<uint64_t>& signature, const std::function<void(Stream)>& launch);

  Device device_;
  bool enabled_;
  void* stream_ = nullptr;  // cudaStream_t of our own: the legacy default stream cannot be captured
  void* before_ = nullptr;  // cudaEvent_t: the caller's work before the step
  void* after_ = nullptr;   // cudaEvent_t: the step's end
  std::vector<uint64_t> last_;  // the previous step's signature
  std::vector<std::unique_ptr<Graph>> graphs_;
  int64_t replays_ = 0, captures_ = 0;
  std::string failure_;
};

// ATTNZOO_CUDA_GRAPHS: "0" turns graphs off; anything else (or unset) leaves them on.
bool cuda_graphs_enabled();
// Step graphs replayed in this process, by every runner: what the GPU test reads to know replays happened.
int64_t cuda_graph_replays_total();

}  // namespace attnzoo
