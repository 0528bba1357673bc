// The CUDA prefill's launch: the kernel choice (the Hopper one on sm_90 where it covers the problem,
// prefill_sm90.cu; else this file's sm_80 one), then one stream-ordered upload of the metadata its plan
// (prefill_launch_plan.h) lays out, and the kernel. A caller that launches one plan for several problems (the GPU
// runner's attention layers) prepares it, copies its metadata itself and launches it per problem.
#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/cuda_check.h"
#include "core/error.h"
#include "kernels/softmax/cuda/prefill_cuda.h"
#include "kernels/softmax/cuda/prefill_launch_plan.h"
#include "kernels/softmax/cuda/prefill_sm90_cuda.h"
#include "kernels/softmax/cuda/prefill_sm90_launch_plan.h"
#include "kernels/softmax/cuda/prefill_tile.cuh"

namespace attnzoo {
namespace cuda_prefill {

template <class Elem, int D>
__global__ void __launch_bounds__(kThreads) prefill_kernel(const PrefillParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  attend_tile<Elem, D>(p, int(blockIdx.x), int(blockIdx.y), smem);
}

}  // namespace cuda_prefill

namespace {
using namespace cuda_prefill;

template <class Elem, int D>
void launch(const PrefillParams& params, int64_t work_items, int64_t Hq, cudaStream_t stream) {
  constexpr int smem = TileShape<D>::kSmemBytes;
  // Above 48 KB of dynamic shared memory a kernel must opt in; the attribute is per device and cheap to set.
  cuda_check(cudaFuncSetAttribute(prefill_kernel<Elem, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
        "cudaFuncSetAttribute");
  prefill_kernel<Elem, D><<<dim3(unsigned(work_items), unsigned(Hq)), kThreads, smem, stream>>>(params);
  cuda_check(cudaGetLastError(), "prefill_kernel launch");
}

template <class Elem>
void launch_for_dim(int64_t D, const PrefillParams& params, int64_t work_items, int64_t Hq, cudaStream_t stream) {
  switch (D) {
    case 64: return launch<Elem, 64>(params, work_items, Hq, stream);
    case 96: return launch<Elem, 96>(params, work_items, Hq, stream);
    case 128: return launch<Elem, 128>(params, work_items, Hq, stream);
    case 256: return launch<Elem, 256>(params, work_items, Hq, stream);
    default: throw ArgumentError("q: head_dim D on CUDA must be 64, 96, 128 or 256, got " + std::to_string(D));
  }
}

// The current device's compute capability major, asked of the runtime once per device.
int current_sm_major() {
  int device = 0;
  cuda_check(cudaGetDevice(&device), "cudaGetDevice");
  static std::array<std::atomic<int>, 64> known{};  // 0: not asked yet
  if (device < int(known.size()))
    if (const int major = known[size_t(device)].load(std::memory_order_relaxed)) return major;
  int major = 0;
  cuda_check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute");
  if (device < int(known.size())) known[size_t(device)].store(major, std::memory_order_relaxed);
  return major;
}

// The current device's multiprocessor count (the Hopper prefill's persistent grid), asked once per device.
int current_multiprocessors() {
  int device = 0;
  cuda_check(cudaGetDevice(&device), "cudaGetDevice");
  static std::array<std::atomic<int>, 64> known{};  // 0: not asked yet
  if (device < int(known.size()))
    if (const int sms = known[size_t(device)].load(std::memory_order_relaxed)) return sms;
  int sms = 0;
  cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  if (device < int(known.size())) known[size_t(device)].store(sms, std::memory_order_relaxed);
  return sms;
}

}  // namespace

void attention_prefill_cuda(const AttentionProblem& p, Stream stream) {
  require(p.device.is_cuda(), "q", "lives on " + p.device.str() + "; the CUDA prefill needs device memory");
  const PreparedPrefillCuda prepared = prepare_attention_prefill_cuda(p);
  if (prepared.launch.work_items == 0) return;
  // One allocation and one copy for everything the kernel reads besides the tensors.
  auto cuda_stream = static_cast<cudaStream_t>(stream.handle);
  StreamScratch scratch(prepared.launch.metadata.size(), cuda_stream);
  scratch.upload(prepared.launch.metadata.data(), prepared.launch.metadata.size());
  launch_prepared_prefill_cuda(prepared, scratch.data(), {p.q, p.k, p.v, p.o}, stream);
  scratch.finish();  // ordered after the kernel on the stream
}

PreparedPrefillCuda prepare_attention_prefill_cuda(const AttentionProblem& p) {
  PreparedPrefillCuda d;
  d.path = choose_prefill_path(p, current_sm_major(), std::getenv("ATTNZOO_CUDA_PREFILL"));
  // Read on every path, so a misspelt value fails on any GPU, not only where the Hopper kernel runs.
  d.schedule = choose_prefill_schedule(std::getenv("ATTNZOO_CUDA_PREFILL_SCHEDULE"));
  if (d.path == PrefillPath::sm90) {
    PrefillSm90Plan plan = plan_prefill_sm90(p, current_multiprocessors());
    d.launch = std::move(plan.launch);
    d.q = plan.q, d.k = plan.k, d.v = plan.v;
    d.items = plan.items, d.ctas = plan.ctas;
    d.schedule_at = plan.schedule_at;
  } else {
    d.launch = plan_prefill_launch(p);
  }
  d.dtype = p.q_dtype;
  d.D = p.D;
  d.Hq = p.Hq;
  return d;
}

void launch_prepared_prefill_cuda(const PreparedPrefillCuda& d, const unsigned char* metadata, const PrefillTensors& t,
                                  Stream stream) {
  if (d.launch.work_items == 0) return;
  PrefillParams params = bind_metadata(d.launch, metadata);
  params.q = t.q, params.k = t.k, params.v = t.v, params.o = t.o;
  if (d.path == PrefillPath::sm90) {
    // The maps' shapes and strides are the prepared problem's; only their bases are this launch's.
    sm90::TensorMapSpec q = d.q, k = d.k, v = d.v;
    q.base = t.q, k.base = t.k, v.base = t.v;
    // The counters are the one part of the metadata the kernel writes (the device copy is ordinary memory).
    auto* counters = reinterpret_cast<uint32_t*>(const_cast<unsigned char*>(metadata) + d.schedule_at);
    const PrefillSm90Params sm90_params{params, sm90::encode_tensor_map(q), sm90::encode_tensor_map(k),
                                        sm90::encode_tensor_map(v), int32_t(d.Hq), d.items, counters};
    return launch_prefill_sm90_cuda(sm90_params, d.ctas, d.D, d.dtype, d.schedule, stream);
  }
  auto cuda_stream = static_cast<cudaStream_t>(stream.handle);
  if (d.dtype == DType::bf16)
    launch_for_dim<__nv_bfloat16>(d.D, params, d.launch.work_items, d.Hq, cuda_stream);
  else
    launch_for_dim<__half>(d.D, params, d.launch.work_items, d.Hq, cuda_stream);
}

}  // namespace attnzoo
