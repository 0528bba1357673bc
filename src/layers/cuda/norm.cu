// RMSNorm kernels (norm_cuda.h). Memory-bound: each row is read once for its sum of squares and once more (from L1
// / L2, the same thread's own elements) to write the output; a mean-centered norm reads it a third time rather
// than keep var = E[x^2] - mean^2, which cancels when the mean is large next to the spread.
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "core/error.h"
#include "layers/cuda/norm_cuda.h"
#include "layers/cuda/step_kernels.cuh"

namespace attnzoo {
namespace cuda_step {
namespace {

constexpr int kBlock = 256;

template <class T>
struct NormParams {
  const T* x;
  T* residual;  // null without the fused add
  const float* weight;
  T* y;
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
template <class T, int N, int kRowThreads, bool kResidual>
__global__ void __launch_bounds__(kBlock) rms_norm_kernel(const NormParams<T> p) {
  constexpr int kRowsPerBlock = kBlock / kRowThreads;
  __shared__ float partial[kBlock / 32];
  const int lane = int(threadIdx.x) % kRowThreads;
  const int64_t cols = p.x_rows.cols, step = int64_t(gridDim.x) * kRowsPerBlock;
  for (int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kRowThreads; row < p.x_rows.count;
       row += step) {
    const T* x = p.x + p.x_rows.start(row);
    T* residual = kResidual ? p.residual + p.residual_rows.start(row) : nullptr;
    T* y = p.y + p.y_rows.start(row);
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

template <class T, int N, bool kResidual>
void launch(const NormParams<T>& p, cudaStream_t stream) {
  // A warp per row up to 4 accesses per lane (dim 1024 in bf16): head norms and small models keep every lane
  // busy; longer rows take the whole block so a decode step's few rows still spread over 256 threads each.
  const int64_t accesses = (p.x_rows.cols + N - 1) / N;
  if (accesses <= 4 * 32) {
    rms_norm_kernel<T, N, 32, kResidual><<<grid_for(p.x_rows.count, kBlock / 32), kBlock, 0, stream>>>(p);
  } else {
    rms_norm_kernel<T, N, kBlock, kResidual><<<grid_for(p.x_rows.count, 1), kBlock, 0, stream>>>(p);
  }
  cuda_check(cudaGetLastError(), "rms_norm_kernel launch");
}

void run(const TensorView& x, const TensorView* residual, const TensorView& weight, const TensorView& y,
         const RmsNormCudaOptions& opts, Stream stream) {
  const Rows x_rows = rows_of(x, "x"), y_rows = rows_of(y, "y");
  const Rows r_rows = residual ? rows_of(*residual, "residual") : Rows{};
  if (x_rows.count == 0) return;
  const DeviceGuard on(x.device);
  const auto s = static_cast<cudaStream_t>(stream.handle);
  with_float_type(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = 16 / sizeof(T);
    const NormParams<T> p{x.ptr<const T>(), residual ? residual->ptr<T>() : nullptr, weight.ptr<const float>(),
                          y.ptr<T>(), RowMap(x_rows), RowMap(r_rows), RowMap(y_rows), opts.eps, opts.mean_centered};
    // The f32 weight's offsets are multiples of V floats, 16 bytes or more: its base alone decides.
    const bool vec = rows_vectorizable(x_rows, x.data, sizeof(T)) && rows_vectorizable(y_rows, y.data, sizeof(T)) &&
                     (!residual || rows_vectorizable(r_rows, residual->data, sizeof(T))) &&
                     reinterpret_cast<uintptr_t>(weight.data) % 16 == 0;
    if (residual) {
      vec ? launch<T, V, true>(p, s) : launch<T, 1, true>(p, s);
    } else {
      vec ? launch<T, V, false>(p, s) : launch<T, 1, false>(p, s);
    }
  });
}

}  // namespace
}  // namespace cuda_step

void rms_norm_cuda(const TensorView& x, const TensorView& weight, const TensorView& y, const RmsNormCudaOptions& opts,
                   Stream stream) {
  check_rms_norm_cuda(x, nullptr, weight, y, opts);
  cuda_step::run(x, nullptr, weight, y, opts, stream);
}

void fused_add_rms_norm_cuda(const TensorView& x, const TensorView& residual, const TensorView& weight,
                             const TensorView& y, const RmsNormCudaOptions& opts, Stream stream) {
  check_rms_norm_cuda(x, &residual, weight, y, opts);
  cuda_step::run(x, &residual, weight, y, opts, stream);
}

}  // namespace attnzoo
