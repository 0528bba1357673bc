#pragma once
// Sums across a full warp by butterfly shuffles: every lane ends with the total, so no lane has to broadcast it.
#include <cuda_runtime.h>

namespace attnzoo::cuda_linear {

__device__ __forceinline__ float warp_sum(float x) {
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

}  // namespace attnzoo::cuda_linear
