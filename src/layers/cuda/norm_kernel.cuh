#pragma once
// The device side of the RMSNorm kernels (norm.cu launches them; norm_cuda.h has the contract). Memory-bound: each
// row is read once for its sum of squares and once more (from L1 / L2, the same thread's own elements) to write the
// output; a mean-centered norm reads it a third time rather than keep var = E[x^2] - mean^2, which cancels when the
// mean is large next to the spread.
#include "layers/cuda/step_kernels.cuh"

namespace attnzoo::cuda_step {

constexpr int kBlock = 256;

// Y: the output's type, T's or (f32 x) a 16-bit one, so a norm over the f32 residual stream hands the
// projections bf16 rows that cuBLASLt multiplies with bf16 weights directly.
template <class T, class Y = T>
struct NormParams {
  const T* x;
  T* residual;  // null without the fused add
  const float* weight;
  Y* y;
  RowMap x_rows, residual_rows, y_rows;
  float eps;
  bool centered;
};

// The sum over the threads of one row: a warp's shuffles, then (a block per row) the warps' partials in shared
// memory. The leading barrier keeps a slow thread's read of the previous sum from meeting this one's write.
template <int kRowThreads>
__device__ __forceinline__ float row_sum(float v, float* partial) {
  v = warp_sum(v);
  if constexpr (kRowThreads == 32) {
    return v;
  } else {
    __syncthreads();
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
    __syncthreads();
    float total = 0.f;
#pragma unroll
    for (int i = 0; i < kRowThreads / 32; ++i) total += partial[i];
    return total;
  }
}

// kRowThreads threads per row (a warp for short rows, the block for long ones), N elements per access. Rows are
// uniform across the threads that share them, so the barriers inside row_sum are reached by all or none.
template <class T, int N, int kRowThreads, bool kResidual, class Y = T>
__device__ __forceinline__ void rms_norm_rows(const NormParams<T, Y>& p) {
  constexpr int kRowsPerBlock = kBlock / kRowThreads;
  __shared__ float partial[kBlock / 32];
  const int lane = int(threadIdx.x) % kRowThreads;
  const int64_t cols = p.x_rows.cols, step = int64_t(gridDim.x) * kRowsPerBlock;
  for (int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kRowThreads; row < p.x_rows.count;
       row += step) {
    const T* x = p.x + p.x_rows.start(row);
    T* residual = kResidual ? p.residual + p.residual_rows.start(row) : nullptr;
    Y* y = p.y + p.y_rows.start(row);
    const T* src = kResidual ? residual : x;  // what is normalized: the updated residual stream, or x

    float sum = 0.f, sumsq = 0.f;
    for (int64_t c = int64_t(lane) * N; c < cols; c += kRowThreads * N) {
      float v[N];
      load<N>(x + c, v);
      if constexpr (kResidual) {
        float r[N];
        load<N>(residual + c, r);
#pragma unroll
        for (int i = 0; i < N; ++i) v[i] = to_f32(from_f32<T>(v[i] + r[i]));  // normalize what is stored
        store<N>(residual + c, v);
      }
#pragma unroll
      for (int i = 0; i < N; ++i) {
        sum += v[i];
        sumsq += v[i] * v[i];
      }
    }
    float mean = 0.f;
    if (p.centered) {
      mean = row_sum<kRowThreads>(sum, partial) / float(cols);
      sumsq = 0.f;
      for (int64_t c = int64_t(lane) * N; c < cols; c += kRowThreads * N) {
        float v[N];
        load<N>(src + c, v);
#pragma unroll
        for (int i = 0; i < N; ++i) sumsq += (v[i] - mean) * (v[i] - mean);
      }
    }
    // 1 / sqrtf (both IEEE-rounded) rather than rsqrtf's 2 ulp: the CPU's rms_norm divides the same way.
    const float inv = 1.f / sqrtf(row_sum<kRowThreads>(sumsq, partial) / float(cols) + p.eps);
    for (int64_t c = int64_t(lane) * N; c < cols; c += kRowThreads * N) {
      float v[N], w[N];
      load<N>(src + c, v);
      load<N>(p.weight + c, w);
#pragma unroll
      for (int i = 0; i < N; ++i) v[i] = w[i] * ((v[i] - mean) * inv);
      store<N>(y + c, v);
    }
  }
}

}  // namespace attnzoo::cuda_step
