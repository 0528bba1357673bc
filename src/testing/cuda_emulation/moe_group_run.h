#pragma once
// Runs the MoE grouping (layers/cuda/moe_kernel.cuh) on the emulator the way moe.cu runs it on a GPU: the
// single-CTA kernel, or for a plan of several CTAs its three launches over a counts scratch filled with 0xff bytes
// first (as moe_group_cuda's caller hands it: a workspace's leftovers), so a count read before it is written shows.
#include <cstring>

#include "layers/cuda/moe_kernel.cuh"
#include "layers/cuda/moe_plan.h"
#include "testing/cuda_emulation/cta.h"

namespace attnzoo::cuda_emulation {

// p: the grouping's operands (its counts, ctas and range are the plan's, set here).
inline void run_grouping(cuda_moe::GroupParams p, cuda_moe::GroupPlan plan) {
  using namespace cuda_moe;
  const size_t smem = group_smem_bytes(p.experts);
  if (plan.ctas == 1) {
    launch(dim3(1), kGroupThreads, smem, [&](unsigned char* s) { group_entries(p, s); });
    return;
  }
  DeviceMemory counts(size_t(p.experts) * size_t(plan.ctas) * sizeof(int32_t));
  std::memset(counts.data(), 0xff, counts.size());
  p.counts = reinterpret_cast<int32_t*>(counts.data());
  p.ctas = plan.ctas;
  p.range = plan.range;
  launch(dim3(unsigned(plan.ctas)), kGroupThreads, smem, [&](unsigned char* s) { count_entries(p, s); });
  launch(dim3(1), kScanThreads, scan_smem_bytes(p.experts), [&](unsigned char* s) { scan_counts(p, s); });
  launch(dim3(unsigned(plan.ctas)), kGroupThreads, smem, [&](unsigned char* s) { scatter_entries(p, s); });
}

// As moe_group_cuda picks: plan_group(n).
inline void run_grouping(const cuda_moe::GroupParams& p) { run_grouping(p, cuda_moe::plan_group(p.n)); }

}  // namespace attnzoo::cuda_emulation
