#pragma once
// The Hopper prefill's launch, decided on the host: whether its kernel covers a problem, which kernel a launch
// takes, and the Hopper plan (the sm_80 plan's work list cut into 128-row tiles, the Q / K / V tensor maps and the
// persistent grid).
// Plain C++, so the choice is tested on every machine and the emulator runs the same plan.
#include "kernels/softmax/cuda/prefill_launch_plan.h"
#include "kernels/softmax/cuda/prefill_sm90_params.h"
#include "kernels/softmax/problem.h"

namespace attnzoo::cuda_prefill {

// Why the Hopper kernel does not cover a problem check_cuda_prefill accepted, or nullptr when it does.
const char* sm90_prefill_gap(const AttentionProblem& p);

enum class PrefillPath { sm80, sm90 };
const char* prefill_path_name(PrefillPath path);

// The kernel a launch on a GPU of compute capability `sm_major`.x takes: the Hopper one on sm_90 when it covers
// the problem, else the sm_80 one. `forced` (the ATTNZOO_CUDA_PREFILL environment variable, or null): "sm80"
// keeps every launch on the sm_80 kernel, so both can be compared on one GPU; anything else is the default.
PrefillPath choose_prefill_path(const AttentionProblem& p, int sm_major, const char* forced);

// The Hopper kernel's schedule (prefill_sm90_params.h). `forced` (the ATTNZOO_CUDA_PREFILL_SCHEDULE environment
// variable, or null): "static" or "dynamic"; null or empty is static_stride, anything else an ArgumentError
// naming the variable.
PrefillSchedule choose_prefill_schedule(const char* forced);
const char* prefill_schedule_name(PrefillSchedule schedule);

struct PrefillSm90Plan {
  PrefillLaunchPlan launch;  // work_items == 0: nothing to launch
  sm90::TensorMapSpec q, k, v;
  int32_t items = 0;  // (work item, head) pairs, heads innermost
  unsigned ctas = 0;  // persistent CTAs: one per multiprocessor, fewer when there are fewer items
  // Where launch.metadata holds the dynamic schedule's two counters (PrefillSm90Params::schedule), as zeros. Both
  // schedules' plans carry them, so a prepared plan may launch either.
  size_t schedule_at = 0;
};
// For a problem sm90_prefill_gap covers, on a GPU of `multiprocessors` SMs (at least 1).
PrefillSm90Plan plan_prefill_sm90(const AttentionProblem& p, int multiprocessors);

}  // namespace attnzoo::cuda_prefill
