// RMSNorm launchers (norm_cuda.h); the kernel's body is norm_kernel.cuh.
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "core/error.h"
#include "layers/cuda/norm_cuda.h"
#include "layers/cuda/norm_kernel.cuh"

namespace attnzoo {
namespace cuda_step {
namespace {

template <class T, int N, int kRowThreads, bool kResidual, class Y>
__global__ void __launch_bounds__(kBlock) rms_norm_kernel(const NormParams<T, Y> p) {
  rms_norm_rows<T, N, kRowThreads, kResidual, Y>(p);
}

template <class T, int N, bool kResidual, class Y>
void launch(const NormParams<T, Y>& p, cudaStream_t stream) {
  // A warp per row up to 4 accesses per lane (dim 1024 in bf16): head norms and small models keep every lane
  // busy; longer rows take the whole block so a decode step's few rows still spread over 256 threads each.
  const int64_t accesses = (p.x_rows.cols + N - 1) / N;
  if (accesses <= 4 * 32) {
    rms_norm_kernel<T, N, 32, kResidual, Y><<<grid_for(p.x_rows.count, kBlock / 32), kBlock, 0, stream>>>(p);
  } else {
    rms_norm_kernel<T, N, kBlock, kResidual, Y><<<grid_for(p.x_rows.count, 1), kBlock, 0, stream>>>(p);
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
  // y of x's type, or a 16-bit y of an f32 x (the checks refuse the rest).
  auto go = [&](auto x_tag, auto y_tag) {
    using T = decltype(x_tag);
    using Y = decltype(y_tag);
    constexpr int V = 16 / sizeof(T);
    const NormParams<T, Y> p{x.ptr<const T>(), residual ? residual->ptr<T>() : nullptr, weight.ptr<const float>(),
                             y.ptr<Y>(), RowMap(x_rows), RowMap(r_rows), RowMap(y_rows), opts.eps,
                             opts.mean_centered};
    // The f32 weight's offsets are multiples of V floats, 16 bytes or more: its base alone decides.
    const bool vec = rows_vectorizable(x_rows, x.data, sizeof(T)) && rows_vectorizable(y_rows, y.data, sizeof(Y)) &&
                     (!residual || rows_vectorizable(r_rows, residual->data, sizeof(T))) &&
                     reinterpret_cast<uintptr_t>(weight.data) % 16 == 0;
    if (residual) {
      vec ? launch<T, V, true>(p, s) : launch<T, 1, true>(p, s);
    } else {
      vec ? launch<T, V, false>(p, s) : launch<T, 1, false>(p, s);
    }
  };
  if (y.dtype == x.dtype) {
    with_float_type(x.dtype, [&](auto tag) { go(tag, tag); });
  } else {
    with_float_type(y.dtype, [&](auto tag) { go(float{}, tag); });
  }
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
