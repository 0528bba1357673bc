// The Gated DeltaNet gates launcher (gdn_gates_cuda.h); the kernel's body is gdn_gates_kernel.cuh.
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "layers/cuda/gdn_gates_cuda.h"
#include "layers/cuda/gdn_gates_kernel.cuh"

namespace attnzoo {
namespace cuda_step {
namespace {

__global__ void __launch_bounds__(kGateThreads) gdn_gates_kernel(const GdnGateParams p) { gdn_gates(p); }

}  // namespace
}  // namespace cuda_step

void gdn_gates_cuda(const GdnGates& x, Stream stream) {
  using namespace cuda_step;
  check_gdn_gates_cuda(x);
  const int64_t T = x.g.shape[0], HV = x.g.shape[1];
  if (T * HV == 0) return;
  const GdnGateParams p{x.b.ptr<const float>(),     x.a.ptr<const float>(), x.b.strides[0], x.a.strides[0],
                        x.neg_A.ptr<const float>(), x.dt_bias.ptr<const float>(), x.g.ptr<float>(), x.beta.ptr<float>(),
                        T,                          HV};
  const DeviceGuard on(x.g.device);
  gdn_gates_kernel<<<grid_for(T * HV, kGateThreads), kGateThreads, 0, static_cast<cudaStream_t>(stream.handle)>>>(p);
  cuda_check(cudaGetLastError(), "gdn_gates_kernel launch");
}

}  // namespace attnzoo
