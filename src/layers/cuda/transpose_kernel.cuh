#pragma once
// The device side of transpose_cuda (transpose.cu launches it; transpose_cuda.h has the contract): one thread per
// element, grid-stride over a source row's columns in x and over rows in y, so the reads are coalesced and the
// writes strided. The mixer transposes a few [T, inner] blocks per layer and step; a shared-memory tiled version
// is the obvious next step once a GPU has timed this one.
#include "layers/cuda/step_kernels.cuh"

namespace attnzoo::cuda_step {

constexpr int kTransposeThreads = 256;

struct TransposeParams {
  const float* src;
  float* dst;
  int64_t rows, cols, src_stride, dst_stride;
};

__device__ __forceinline__ void transpose_rows(const TransposeParams& p) {
  for (int64_t r = blockIdx.y; r < p.rows; r += gridDim.y) {
    const float* src = p.src + r * p.src_stride;
    for (int64_t c = int64_t(blockIdx.x) * kTransposeThreads + threadIdx.x; c < p.cols;
         c += int64_t(gridDim.x) * kTransposeThreads)
      p.dst[c * p.dst_stride + r] = src[c];
  }
}

}  // namespace attnzoo::cuda_step
