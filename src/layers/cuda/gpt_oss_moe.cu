// The gpt-oss expert launchers (gpt_oss_moe_cuda.h): the checks are gpt_oss_moe_checks.cc's, the kernels' bodies
// gpt_oss_moe_kernel.cuh.
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "layers/cuda/gpt_oss_moe_cuda.h"
#include "layers/cuda/gpt_oss_moe_kernel.cuh"
#include "layers/cuda/step_kernels.cuh"

namespace attnzoo {
namespace cuda_gpt_oss {
namespace {

__global__ void __launch_bounds__(kThreads) bias_kernel(const BiasParams p) { add_grouped_bias(p); }
__global__ void __launch_bounds__(kThreads) swiglu_kernel(const SwigluParams p) { clamped_swiglu(p); }

}  // namespace
}  // namespace cuda_gpt_oss

void grouped_bias_cuda(const TensorView& y, const TensorView& bias, const TensorView* offsets, Stream stream) {
  using namespace cuda_gpt_oss;
  check_grouped_bias_cuda(y, bias, offsets);
  if (y.shape[0] == 0 || y.shape[1] == 0) return;
  const DeviceGuard on(y.device);
  const BiasParams p{y.ptr<float>(), y.strides[0], bias.ptr<const float>(),
                     offsets ? offsets->ptr<const int32_t>() : nullptr, int(y.shape[0]), int(y.shape[1]),
                     int(bias.shape[0])};
  bias_kernel<<<cuda_step::grid_for(y.shape[0] * y.shape[1], kThreads), kThreads, 0,
                static_cast<cudaStream_t>(stream.handle)>>>(p);
  cuda_check(cudaGetLastError(), "gpt-oss bias_kernel launch");
}

void gpt_oss_swiglu_cuda(const TensorView& gate, const TensorView& up, float alpha, float limit,
                         const TensorView& out, Stream stream) {
  using namespace cuda_gpt_oss;
  check_gpt_oss_swiglu_cuda(gate, up, alpha, limit, out);
  if (out.shape[0] == 0 || out.shape[1] == 0) return;
  const DeviceGuard on(gate.device);
  const SwigluParams p{gate.ptr<const float>(), up.ptr<const float>(), out.ptr<float>(), gate.strides[0],
                       up.strides[0], out.strides[0], int(out.shape[0]), int(out.shape[1]), alpha, limit};
  swiglu_kernel<<<cuda_step::grid_for(out.shape[0] * out.shape[1], kThreads), kThreads, 0,
                  static_cast<cudaStream_t>(stream.handle)>>>(p);
  cuda_check(cudaGetLastError(), "gpt-oss swiglu_kernel launch");
}

}  // namespace attnzoo
