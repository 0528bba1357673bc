#pragma once
// The grouped GEMM's CTA (moe_cuda.h): blockIdx.x is a row tile of the grouped order, blockIdx.y a column block.
// The tile prefix the grouping wrote (tiles [E + 1]) names the CTA's expert by binary search: the last e with
// tiles[e] <= tile, which skips the experts without rows (their tiles[e] equals the next one's). CTAs past
// tiles[E] exit before any barrier; the rest run gemm_kernel.cuh's block over their expert's rows, weights and
// output rows, so a segment's edge is masked as any GEMM's M edge is and no CTA reads another expert's rows.
#include "layers/cuda/gemm_kernel.cuh"
#include "layers/cuda/moe_plan.h"

namespace attnzoo::cuda_moe {

template <class Tile, class W>
__device__ __forceinline__ void grouped_gemm_block(const GroupedGemmParams& p, unsigned char* smem) {
  const int tile = int(blockIdx.x);
  if (tile >= p.tiles[p.experts]) return;
  int lo = 0, hi = p.experts - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (p.tiles[mid] <= tile) lo = mid;
    else hi = mid - 1;
  }
  const int e = lo, row0 = p.offsets[e];
  cuda_gemm::GemmParams g = p.gemm;
  g.M = p.offsets[e + 1] - row0;
  g.x = static_cast<const unsigned char*>(p.gemm.x) + int64_t(row0) * p.x_row_bytes;
  g.w = static_cast<const W*>(p.gemm.w) + int64_t(e) * p.w_expert_elems;
  g.y = static_cast<unsigned char*>(p.gemm.y) + int64_t(row0) * p.y_row_bytes;
  cuda_gemm::gemm_block_at<Tile, W>(g, smem, (tile - p.tiles[e]) * Tile::BM, int(blockIdx.y) * Tile::BN);
}

}  // namespace attnzoo::cuda_moe
