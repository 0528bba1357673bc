#pragma once
// The device side of transpose_cuda (transpose.cu launches it; transpose_cuda.h has the contract). A thread per
// element reading along rows writes dst a column at a time: every store of a warp lands in its own 32-byte sector,
// eight times the traffic the data needs. So a block moves 32 x 32 tiles through shared memory: it reads 32 rows
// of 32 columns (a warp per row, coalesced), then writes 32 destination rows of 32 (again a warp per row,
// coalesced). The tile row is padded to 33 floats so the column-wise reads of the second half fall on 32
// different banks. Tiles are walked grid-stride in both dimensions; the loops' bounds depend only on the block, so
// every thread reaches both barriers of every round.
#include "layers/cuda/step_kernels.cuh"

namespace attnzoo::cuda_step {

constexpr int kTransposeTile = 32;
constexpr int kTransposeThreads = 256;  // 8 warps, each moving 4 of a tile's 32 rows
constexpr int kTransposeRowsPerPass = kTransposeThreads / kTransposeTile;

struct TransposeParams {
  const float* src;
  float* dst;
  int64_t rows, cols, src_stride, dst_stride;
};

__device__ __forceinline__ void transpose_rows(const TransposeParams& p) {
  __shared__ float tile[kTransposeTile][kTransposeTile + 1];
  const int lane = int(threadIdx.x) % kTransposeTile, first = int(threadIdx.x) / kTransposeTile;
  const int64_t row_tiles = (p.rows + kTransposeTile - 1) / kTransposeTile;
  const int64_t col_tiles = (p.cols + kTransposeTile - 1) / kTransposeTile;
  for (int64_t rt = blockIdx.y; rt < row_tiles; rt += gridDim.y)
    for (int64_t ct = blockIdx.x; ct < col_tiles; ct += gridDim.x) {
      const int64_t r0 = rt * kTransposeTile, c0 = ct * kTransposeTile;
      for (int i = first; i < kTransposeTile; i += kTransposeRowsPerPass)
        if (r0 + i < p.rows && c0 + lane < p.cols) tile[i][lane] = p.src[(r0 + i) * p.src_stride + c0 + lane];
      __syncthreads();
      for (int i = first; i < kTransposeTile; i += kTransposeRowsPerPass)
        if (c0 + i < p.cols && r0 + lane < p.rows) p.dst[(c0 + i) * p.dst_stride + r0 + lane] = tile[lane][i];
      __syncthreads();  // the next round refills the tile
    }
}

// The launch grid: a block per tile, within grid.x / grid.y's limits (the loops above take the rest).
inline dim3 transpose_grid(int64_t rows, int64_t cols) {
  return dim3(grid_for(cols, kTransposeTile), grid_rows((rows + kTransposeTile - 1) / kTransposeTile));
}

}  // namespace attnzoo::cuda_step
