#pragma once
// The MoE kernels' launches, decided on the host (plain C++, so the emulator's cases and moe.cu fill them alike).
#include <cstddef>
#include <cstdint>

#include "layers/cuda/gemm_plan.h"
#include "layers/cuda/moe_cuda.h"

namespace attnzoo::cuda_moe {

// The grouping: a stable counting sort of a step's n routed entries by expert, without atomics. Up to
// kGroupOneCtaMax entries (a decode step: 64 tokens x top 8 = 512) it runs as one CTA (group_entries): one launch,
// per-expert cursors in shared memory. Above, a prefill's tens of thousands would serialize on one SM, so it runs
// as three launches: ctas CTAs each count a contiguous range of `range` entries per expert (count_entries), one
// CTA scans the (expert, CTA) counts into each CTA's per-expert bases, the offsets and the tile prefix
// (scan_counts), and the same CTAs place their ranges from those bases in entry order (scatter_entries). The
// threshold: at two ranges or fewer the split gains at most 2x over a few chunks, less than two more launches on
// the stream cost (an estimate, not a measurement).
constexpr int kGroupThreads = 256;
constexpr int kGroupRange = 4 * kGroupThreads;  // entries per CTA of the multi-CTA path (more for huge n)
constexpr int64_t kGroupOneCtaMax = 2 * kGroupRange;
constexpr int kGroupMaxCtas = 1024;  // bounds the scratch (experts x CTAs) and the scan over it
constexpr int kScanThreads = 1024, kScanItems = 8;

struct GroupParams {
  const int32_t* ids;  // [n]
  int n, experts, tile_rows;
  int32_t *offsets, *tiles, *source, *dest;
  int32_t* counts;  // [experts, ctas]: each CTA's count per expert, then its base (multi-CTA only)
  int ctas, range;
};

// ctas == 1: the single-CTA group_entries over all n; else ctas CTAs of `range` entries (a multiple of
// kGroupThreads), the last one partial.
struct GroupPlan {
  int ctas, range;
};
GroupPlan plan_group(int64_t n);

// Shared memory: a cursor per expert and one chunk of ids (every CTA of either path).
inline size_t group_smem_bytes(int experts) { return size_t(experts + kGroupThreads) * sizeof(int32_t); }
// The scan's: one tile of counts, the warps' sums, each expert's start.
inline size_t scan_smem_bytes(int experts) {
  return size_t(kScanThreads * kScanItems + 32 + experts + 1) * sizeof(int32_t);
}

struct GatherParams {
  const void* h;  // f32 / bf16 / f16, rows ldh elements apart
  int64_t ldh;
  const int32_t* source;
  void* x;  // [n, H], W's dtype
  int n, H, top_k;
};

struct CombineParams {
  const float* expert_out;  // [n, H] contiguous
  const int32_t* dest;
  const float* weights;  // [T, top_k]
  const float* shared;   // [T, ldshared] or null
  int64_t ldshared;
  const float* shared_gate;  // [T] with stride ldgate, or null
  int64_t ldgate;
  float* x;
  int64_t ldx;
  int T, H, top_k;
};

struct RouterParams {
  const void* x;  // f32 / bf16 / f16, rows ldx elements apart
  int64_t ldx;
  const float* w;  // [E, H] contiguous
  float* logits;   // [T, E] contiguous
  int T, E, H;
};

struct ActivationParams {
  float* x;
  int64_t count;
};

// One launch of the grouped GEMM: `gemm` is expert 0's problem over all n rows (its flags hold for every expert's
// segment: segments start at whole rows and experts' W at whole [N, K] matrices of a K divisible by 8 when async);
// each CTA rebases x, w, y and M to its expert.
struct GroupedGemmParams {
  cuda_gemm::GemmParams gemm;
  int64_t x_row_bytes, y_row_bytes, w_expert_elems;
  const int32_t* offsets;
  const int32_t* tiles;
  int experts;
};

struct GroupedGemmLaunch {
  GroupedGemmParams params;
  cuda_gemm::TileKind tile;
  unsigned grid_m, grid_n;
  int threads;
  size_t smem;
};

// After check_grouped_gemm_cuda.
GroupedGemmLaunch plan_grouped_gemm(const TensorView& x, const TensorView& w, const MoeGroupingCuda& g,
                                    cuda_gemm::TileKind tile, const TensorView& y);

}  // namespace attnzoo::cuda_moe
