// The gated delta family's gates launcher (delta_gates_cuda.h); the kernel's body is delta_gates_kernel.cuh.
#include <cuda_runtime.h>

#include <algorithm>

#include "core/cuda_check.h"
#include "layers/cuda/delta_gates_cuda.h"
#include "layers/cuda/delta_gates_kernel.cuh"

namespace attnzoo {
namespace cuda_step {
namespace {

__global__ void __launch_bounds__(kGateThreads) delta_gates_kernel(const DeltaGateParams p) { delta_gates(p); }

}  // namespace
}  // namespace cuda_step

void delta_gates_cuda(const DeltaGates& x, Stream stream) {
  using namespace cuda_step;
  check_delta_gates_cuda(x);
  const int64_t T = x.g.shape[0], Ng = x.g.shape[1], Nb = x.beta.shape[1];
  if (T == 0) return;
  const DeltaGateParams p{x.b.ptr<const float>(),     x.a.ptr<const float>(),       x.b.strides[0],
                          x.a.strides[0],             x.neg_A.ptr<const float>(),   x.dt_bias.ptr<const float>(),
                          x.g.ptr<float>(),           x.beta.ptr<float>(),          T,
                          Ng,                         Nb,                           Ng / x.neg_A.shape[0]};
  const DeviceGuard on(x.g.device);
  const unsigned blocks = grid_for(T * std::max(Ng, Nb), kGateThreads);
  delta_gates_kernel<<<blocks, kGateThreads, 0, static_cast<cudaStream_t>(stream.handle)>>>(p);
  cuda_check(cudaGetLastError(), "delta_gates_kernel launch");
}

}  // namespace attnzoo
