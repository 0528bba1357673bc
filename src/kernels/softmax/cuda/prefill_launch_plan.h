#pragma once
// The CUDA prefill's launch, decided on the host: the work list (one CTA per query tile per head, so a ragged
// batch launches no idle CTAs), the bytes of metadata the kernel reads besides the tensors, and its parameters.
// Plain C++: prefill.cu uploads the metadata and launches; the kernel emulator (testing/cuda_emulation) runs the
// same plan through the same tile code on the host.
#include <cstddef>
#include <vector>

#include "kernels/softmax/cuda/prefill_params.h"
#include "kernels/softmax/problem.h"

namespace attnzoo::cuda_prefill {

struct PrefillLaunchPlan {
  std::vector<unsigned char> metadata;  // SeqDesc[], WorkItem[], sinks, slopes: one upload
  size_t work_at = 0, sinks_at = 0, slopes_at = 0;
  bool has_sinks = false, has_slopes = false;
  unsigned work_items = 0;  // grid x; grid y is one CTA per query head
  PrefillParams params{};   // complete except the pointers into the metadata
};

// For a problem check_cuda_prefill accepted. work_items == 0: nothing to launch. The work list cuts each
// sequence's queries into tiles of `query_tile` rows, ordered by their count of `key_tile`-key tiles (the sm_80
// kernel's by default).
PrefillLaunchPlan plan_prefill_launch(const AttentionProblem& p, int64_t query_tile = kQueryTile, int64_t key_tile = 0);

// The plan's parameters with its metadata pointers set to `metadata`, the device copy of plan.metadata.
PrefillParams bind_metadata(const PrefillLaunchPlan& plan, const unsigned char* metadata);

}  // namespace attnzoo::cuda_prefill
