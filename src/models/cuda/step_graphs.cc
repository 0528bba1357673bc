#include "models/cuda/step_graphs.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <cstring>

#if ATTNZOO_WITH_CUDA
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#endif

namespace attnzoo {

namespace {
std::atomic<int64_t> g_replays{0};
}  // namespace

int64_t cuda_graph_replays_total() { return g_replays.load(); }

bool cuda_graphs_enabled() {
  const char* v = std::getenv("ATTNZOO_CUDA_GRAPHS");
  return !(v && std::strcmp(v, "0") == 0);
}

#if ATTNZOO_WITH_CUDA
namespace {
// Graphs kept at once: a serve loop alternates among a few batch shapes; each holds its launches' parameters only.
constexpr size_t kMaxGraphs = 8;
}  // namespace

struct StepGraphs::Graph {
  std::vector<uint64_t> signature;
  cudaGraphExec_t exec = nullptr;
  ~Graph() {
    if (exec) cudaGraphExecDestroy(exec);
  }
};

StepGraphs::StepGraphs(Device device, bool enabled) : device_(device), enabled_(enabled) {
  if (!enabled_) return;
  const DeviceGuard on(device_);
  cudaStream_t s = nullptr;
  // Non-blocking: no implicit ordering with the legacy default stream, whose use elsewhere would break a capture;
  // run() orders it with the caller's stream by events.
  cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  stream_ = s;
  cudaEvent_t e = nullptr;
  cuda_check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  before_ = e;
  cuda_check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  after_ = e;
}

StepGraphs::~StepGraphs() {
  if (!stream_) return;  // never enabled (a failed capture turns enabled_ off, not the stream and events)
  const DeviceGuard on(device_);
  graphs_.clear();
  cudaEventDestroy(static_cast<cudaEvent_t>(before_));
  cudaEventDestroy(static_cast<cudaEvent_t>(after_));
  cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

void StepGraphs::run(const std::vector<uint64_t>& signature, const std::function<void(Stream)>& launch,
                     Stream caller) {
  if (!enabled_) return launch(caller);
  const auto own = static_cast<cudaStream_t>(stream_);
  const auto from = static_cast<cudaStream_t>(caller.handle);
  cuda_check(cudaEventRecord(static_cast<cudaEvent_t>(before_), from), "cudaEventRecord");
  cuda_check(cudaStreamWaitEvent(own, static_cast<cudaEvent_t>(before_), 0), "cudaStreamWaitEvent");

  Graph* found = nullptr;
  for (const auto& g : graphs_)
    if (g->signature == signature) found = g.get();
  if (found) {
    cuda_check(cudaGraphLaunch(found->exec, own), "cudaGraphLaunch");
    ++replays_;
    ++g_replays;
  } else if (signature == last_) {
    if (!capture(signature, launch)) {
      // A capture this build's launches do not survive: the step runs as it would without graphs, and so does
      // every later one (said once; the GPU test counts replays).
      std::fprintf(stderr, "attnzoo: CUDA graphs off for this model: %s\n", failure_.c_str());
      enabled_ = false;
      launch(Stream{own});
    }
  } else {
    launch(Stream{own});
  }
  last_ = signature;
  cuda_check(cudaEventRecord(static_cast<cudaEvent_t>(after_), own), "cudaEventRecord");
  cuda_check(cudaStreamWaitEvent(from, static_cast<cudaEvent_t>(after_), 0), "cudaStreamWaitEvent");
}

bool StepGraphs::capture(const std::vector<uint64_t>& signature, const std::function<void(Stream)>& launch) {
  const auto own = static_cast<cudaStream_t>(stream_);
  // Seen in the previous step, which grew every buffer this one needs: nothing allocates while capturing.
  cudaError_t err = cudaStreamBeginCapture(own, cudaStreamCaptureModeRelaxed);
  if (err != cudaSuccess) {
    failure_ = std::string("cudaStreamBeginCapture: ") + cudaGetErrorString(err);
    return false;
  }
  try {
    launch(Stream{own});
  } catch (const std::exception& e) {
    failure_ = e.what();
  }
  cudaGraph_t graph = nullptr;
  err = cudaStreamEndCapture(own, &graph);
  if (!failure_.empty() || err != cudaSuccess) {
    if (failure_.empty()) failure_ = std::string("cudaStreamEndCapture: ") + cudaGetErrorString(err);
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();  // the capture's error is not the next launch's
    return false;
  }
  auto g = std::make_unique<Graph>();
  g->signature = signature;
  err = cudaGraphInstantiate(&g->exec, graph, 0);
  cudaGraphDestroy(graph);
  if (err != cudaSuccess) {
    failure_ = std::string("cudaGraphInstantiate: ") + cudaGetErrorString(err);
    g->exec = nullptr;
    cudaGetLastError();
    return false;
  }
  cuda_check(cudaGraphLaunch(g->exec, own), "cudaGraphLaunch");
  ++captures_;
  if (graphs_.size() == kMaxGraphs) graphs_.erase(graphs_.begin());
  graphs_.push_back(std::move(g));
  return true;
}
#else
struct StepGraphs::Graph {};
StepGraphs::StepGraphs(Device device, bool enabled) : device_(device), enabled_(false) { (void)enabled; }
StepGraphs::~StepGraphs() = default;
void StepGraphs::run(const std::vector<uint64_t>&, const std::function<void(Stream)>& launch, Stream caller) {
  launch(caller);
}
#endif

}  // namespace attnzoo
