#pragma once
// Softmax-attention prefill on an NVIDIA GPU (sm_80 and later): the FlashAttention-2 schedule on mma.sync
// tensor cores, bf16 / f16 operands, f32 accumulation, output in out's dtype. Same semantics as
// attention_prefill_reference: bottom-right-aligned causal, sliding window, softcap, ALiBi, sinks, varlen.
#include "core/device.h"
#include "kernels/softmax/cuda/prefill_sm90_launch_plan.h"
#include "kernels/softmax/problem.h"

namespace attnzoo {

// What only the CUDA path requires beyond make_prefill_problem's checks: bf16 / f16 q, k, v of one dtype;
// head_dim 64, 96, 128 or 256 with Dv == D (96 runs the sm_80 kernel, on Hopper too); no block mask; contiguous
// unquantized K/V; 16-byte aligned bases and strides that are multiples of 8 elements. ArgumentError /
// DTypeError naming the argument.
void check_cuda_prefill(const AttentionProblem& p);

// Runs a validated problem whose q/k/v/o pointers are device memory on the current device (attention_prefill
// sets p.device current first), on `stream`. Host metadata
// (p.seqs, opts.sinks, opts.alibi_slopes: host pointers of Hq floats) is uploaded by this function,
// stream-ordered, so the caller may free it as soon as this returns.
void attention_prefill_cuda(const AttentionProblem& p, Stream stream);

// A prefill planned once on the host and launched for every problem that differs from it only in its tensors'
// addresses (a model's attention layers of one shape over one step's sequences): the caller copies
// `launch.metadata` to device memory once, and each launch reads it there.
struct PreparedPrefillCuda {
  cuda_prefill::PrefillPath path = cuda_prefill::PrefillPath::sm80;
  cuda_prefill::PrefillLaunchPlan launch;  // the Hopper plan's cut on sm90; work_items == 0: nothing to launch
  sm90::TensorMapSpec q, k, v;  // sm90: the maps, their bases the prepared problem's
  int32_t items = 0;                          // sm90: (work item, head) pairs the persistent CTAs share
  unsigned ctas = 0;                          // sm90: the persistent grid
  cuda_prefill::PrefillSchedule schedule = cuda_prefill::PrefillSchedule::static_stride;  // sm90: how they share it
  size_t schedule_at = 0;                     // sm90: the dynamic schedule's counters in launch.metadata
  DType dtype = DType::bf16;                  // of q, k and v
  int64_t D = 0, Hq = 0;
};
// For a problem check_cuda_prefill accepted, on the current device (its compute capability picks the path;
// ATTNZOO_CUDA_PREFILL and ATTNZOO_CUDA_PREFILL_SCHEDULE, read here, may force the sm_80 kernel and pick the
// Hopper kernel's schedule: prefill_sm90_launch_plan.h).
PreparedPrefillCuda prepare_attention_prefill_cuda(const AttentionProblem& p);

struct PrefillTensors {
  const void* q;
  const void* k;
  const void* v;
  void* o;
};
// Launches on `stream` over `metadata` (the device copy of d.launch.metadata) with the tensors `t`, of the
// strides and dtypes the prepared problem had. The Hopper kernel's dynamic schedule counts in that copy (it
// leaves its counters zero, as uploaded, when it ends), so launches over one copy must follow one another on
// one stream, as a model's layers do.
void launch_prepared_prefill_cuda(const PreparedPrefillCuda& d, const unsigned char* metadata, const PrefillTensors& t,
                                  Stream stream);

}  // namespace attnzoo
