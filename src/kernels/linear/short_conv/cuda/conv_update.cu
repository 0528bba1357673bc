// The CUDA short-convolution decode step's launcher: the launch of the plan (conv_update_launch.h, which also
// holds what the kernel refuses).
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "kernels/linear/short_conv/cuda/conv_update_cuda.h"
#include "kernels/linear/short_conv/cuda/conv_update_kernel.cuh"
#include "kernels/linear/short_conv/cuda/conv_update_launch.h"

namespace attnzoo {
namespace cuda_conv {

__global__ void __launch_bounds__(kThreads) conv_update_kernel(const Params p) { conv_update_thread(p); }

}  // namespace cuda_conv

void conv_update_cuda(const ConvProblem& p, Stream stream) {
  const cuda_conv::UpdateLaunch l = cuda_conv::plan_conv_update(p);
  if (l.empty) return;
  cuda_conv::conv_update_kernel<<<l.grid, l.threads, 0, static_cast<cudaStream_t>(stream.handle)>>>(l.params);
  cuda_check(cudaGetLastError(), "conv_update_kernel launch");
}

}  // namespace attnzoo
