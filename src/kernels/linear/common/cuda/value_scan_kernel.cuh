#pragma once
// The device side of the value scans (value_scan.cu): one grid-stride pass over a tensor that keeps the smallest
// offending flat index, so the error names the same element as the host scan would. A device function, so the
// kernel emulator (testing/cuda_emulation) runs the same code.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/linear/common/cuda/float_elem.cuh"

namespace attnzoo::cuda_linear {

constexpr unsigned long long kNone = ~0ull;  // *first before the scan: nothing found

// NaN / Inf, or (log_decay) a positive value: the host scan's rule.
__device__ __forceinline__ void first_bad_value(const void* x, Elem t, int64_t n, bool log_decay,
                                                unsigned long long* first) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const float v = load_elem(x, t, i);
    if (!isfinite(v) || (log_decay && v > 0.f)) atomicMin(first, static_cast<unsigned long long>(i));
  }
}

}  // namespace attnzoo::cuda_linear
