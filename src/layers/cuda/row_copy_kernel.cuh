#pragma once
// The device side of copy_rows_cuda (row_copy.cu launches it; row_copy_cuda.h has the contract): one thread per
// N-float access, grid-stride over a row's accesses in x and over rows in y, as the element-wise kernels walk.
#include "layers/cuda/step_kernels.cuh"

namespace attnzoo::cuda_step {

constexpr int kCopyThreads = 256;

struct RowCopyParams {
  const float* src;
  float* dst;
  const int32_t* src_rows;  // null: row r
  const int32_t* dst_rows;
  int64_t rows, cols, src_stride, dst_stride;
};

template <int N>
__device__ __forceinline__ void copy_rows(const RowCopyParams& p) {
  const int64_t accesses = p.cols / N;
  for (int64_t r = blockIdx.y; r < p.rows; r += gridDim.y) {
    const float* src = p.src + (p.src_rows ? int64_t(p.src_rows[r]) : r) * p.src_stride;
    float* dst = p.dst + (p.dst_rows ? int64_t(p.dst_rows[r]) : r) * p.dst_stride;
    for (int64_t i = int64_t(blockIdx.x) * kCopyThreads + threadIdx.x; i < accesses;
         i += int64_t(gridDim.x) * kCopyThreads) {
      float v[N];
      load<N>(src + i * N, v);
      store<N>(dst + i * N, v);
    }
  }
}

}  // namespace attnzoo::cuda_step
