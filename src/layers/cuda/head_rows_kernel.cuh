#pragma once
// The device side of copy_head_rows_cuda (head_rows.cu launches it; layers/head_rows.h has the contract): one
// thread per 16-bit element of a destination row (every head, every column up to the width), grid-stride over a
// row's elements in x and over rows in y, as row_copy_kernel.cuh walks. Plain element accesses: the copies it
// serves move a small fraction of the bytes of the GEMM and the attention beside them.
#include "layers/cuda/step_kernels.cuh"
#include "layers/head_rows.h"

namespace attnzoo::cuda_step {

constexpr int kHeadRowThreads = 256;

struct HeadRowParams {
  const uint16_t* src;
  uint16_t* dst;
  const int32_t* src_rows;  // null: row r
  const int32_t* dst_rows;
  int64_t rows, heads, cols, width;  // cols copied per head, width written (the rest zeros)
  int64_t src_row_stride, src_head_stride;  // head stride 0: one head broadcast
  int64_t dst_row_stride, dst_head_stride;
};

__device__ __forceinline__ void copy_head_rows(const HeadRowParams& p) {
  const int64_t per_row = p.heads * p.width;
  for (int64_t r = blockIdx.y; r < p.rows; r += gridDim.y) {
    const uint16_t* src = p.src + (p.src_rows ? int64_t(p.src_rows[r]) : r) * p.src_row_stride;
    uint16_t* dst = p.dst + (p.dst_rows ? int64_t(p.dst_rows[r]) : r) * p.dst_row_stride;
    for (int64_t i = int64_t(blockIdx.x) * kHeadRowThreads + threadIdx.x; i < per_row;
         i += int64_t(gridDim.x) * kHeadRowThreads) {
      const int64_t h = i / p.width, j = i - h * p.width;
      dst[h * p.dst_head_stride + j] = j < p.cols ? src[h * p.src_head_stride + j] : uint16_t(0);
    }
  }
}

// What head_rows.cu launches for a checked copy (the emulator cases build theirs the same way).
inline HeadRowParams head_row_params(const HeadRowCopy& c) {
  return {static_cast<const uint16_t*>(c.src.data),
          static_cast<uint16_t*>(c.dst.data),
          c.src_rows,
          c.dst_rows,
          c.rows,
          c.dst.shape[1],
          c.src.shape[2],
          c.dst.shape[2],
          c.src.strides[0],
          c.src.shape[1] == 1 ? 0 : c.src.strides[1],
          c.dst.strides[0],
          c.dst.strides[1]};
}

}  // namespace attnzoo::cuda_step
