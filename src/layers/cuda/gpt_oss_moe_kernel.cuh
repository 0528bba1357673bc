#pragma once
// The device side of gpt_oss_moe_cuda.h (gpt_oss_moe.cu launches it, the CTA emulator runs it in
// testing/cuda_emulation/gpt_oss_moe_cases.cc): the per-expert bias over the grouped rows and the clamped SwiGLU.
// Both grid-stride over [rows, cols] elements, f32 throughout.
#include <cuda_runtime.h>

#include <cstdint>

namespace attnzoo::cuda_gpt_oss {

constexpr int kThreads = 256;

struct BiasParams {
  float* y;  // [rows, cols], rows ldy elements apart
  int64_t ldy;
  const float* bias;      // [experts, cols] contiguous
  const int32_t* offsets;  // [experts + 1], or null: every row takes bias row 0
  int rows, cols, experts;
};

struct SwigluParams {
  const float* gate;  // [rows, cols], rows ldg apart
  const float* up;    // rows ldu apart
  float* out;         // rows ldo apart; may be gate or up
  int64_t ldg, ldu, ldo;
  int rows, cols;
  float alpha, limit;
};

// The expert whose grouped rows [offsets[e], offsets[e + 1]) hold row r: the last e with offsets[e] <= r, by
// bisection (offsets ascend; idle experts repeat a value, and the last of a run is the one that owns the rows).
__device__ __forceinline__ int expert_of_row(const int32_t* offsets, int experts, int r) {
  int lo = 0, hi = experts - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (offsets[mid] <= r) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

__device__ __forceinline__ void add_grouped_bias(const BiasParams& p) {
  const int64_t count = int64_t(p.rows) * p.cols;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    const int r = int(i / p.cols), c = int(i % p.cols);
    const int e = p.offsets ? expert_of_row(p.offsets, p.experts, r) : 0;
    p.y[r * p.ldy + c] += p.bias[int64_t(e) * p.cols + c];
  }
}

// gpt_oss_clamped_swiglu's operations in its order, the clamps spelled as std::min / std::clamp compare (a NaN
// gate passes through as on the CPU).
__device__ __forceinline__ void clamped_swiglu(const SwigluParams& p) {
  const int64_t count = int64_t(p.rows) * p.cols;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / p.cols, c = i % p.cols;
    const float gate = p.gate[r * p.ldg + c], up = p.up[r * p.ldu + c];
    const float g = p.limit < gate ? p.limit : gate;
    const float u = up < -p.limit ? -p.limit : (p.limit < up ? p.limit : up);
    p.out[r * p.ldo + c] = (u + 1.f) * (g / (1.f + expf(-p.alpha * g)));
  }
}

}  // namespace attnzoo::cuda_gpt_oss
