#pragma once
// The device side of the bf16 expansion (dequant_cuda.h). Each thread takes 4 consecutive weights of a row at a
// time, decoded by the GEMV's own Format<kType>::decode4 (gemv_formats.cuh: dequant_reference's f32 operations)
// and rounded to bf16, a warp's 128 weights one coalesced 256-byte store; consecutive threads walk a row, then the
// next, and the grid strides over the matrix.
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/quant/cuda/dequant_launch.h"
#include "kernels/quant/cuda/gemv_formats.cuh"

namespace attnzoo::cuda_quant {

#if defined(ATTNZOO_CUDA_EMULATION)
inline void store_bf16x2(__nv_bfloat162* y, float a, float b) {
  cuda_emulation::check_global(y, 4, "y store");
  *y = __floats2bfloat162_rn(a, b);
}
inline void check_block_read(const unsigned char* block, int bytes) {
  cuda_emulation::check_global(block, size_t(bytes), "w block read");
}
#else
__device__ __forceinline__ void store_bf16x2(__nv_bfloat162* y, float a, float b) { *y = __floats2bfloat162_rn(a, b); }
__device__ __forceinline__ void check_block_read(const unsigned char*, int) {}
#endif

template <QuantType kType>
__device__ __forceinline__ void quant_dequant_thread(const DequantParams& p) {
  using F = Format<kType>;
  const int64_t quads = p.cols / 4, total = p.rows * quads;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; g < total; g += step) {
    const int64_t r = g / quads, e = (g - r * quads) * 4;
    const unsigned char* block = p.w + r * p.w_row_bytes + e / F::kElems * F::kBytes;
    check_block_read(block, F::kBytes);
    float w[4];
    F::decode4(block, int(e % F::kElems), w);
    __nv_bfloat162* y = reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(p.y) + r * p.cols + e);
    store_bf16x2(y, w[0], w[1]);
    store_bf16x2(y + 1, w[2], w[3]);
  }
}

}  // namespace attnzoo::cuda_quant
