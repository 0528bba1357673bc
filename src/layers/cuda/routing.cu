// Top-k routing launcher (routing_cuda.h); the kernel's body is routing_kernel.cuh.
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "core/error.h"
#include "layers/cuda/routing_cuda.h"
#include "layers/cuda/routing_kernel.cuh"

namespace attnzoo {
namespace cuda_step {
namespace {

template <class T, int kPerLane, RouteOrder kOrder>
__global__ void __launch_bounds__(kRouteThreads) route_kernel(const RouteParams<T> p) {
  route_tokens<T, kPerLane, kOrder>(p);
}

template <class T, RouteOrder kOrder>
void launch(const RouteParams<T>& p, cudaStream_t stream) {
  const unsigned grid = grid_for(p.tokens, kWarpsPerBlock);
  // Registers for the scores sized to E: most models have at most 128 experts (4 per lane).
  if (p.experts_per_token <= 128) {
    route_kernel<T, 4, kOrder><<<grid, kRouteThreads, 0, stream>>>(p);
  } else if (p.experts_per_token <= 256) {
    route_kernel<T, 8, kOrder><<<grid, kRouteThreads, 0, stream>>>(p);
  } else {
    route_kernel<T, 32, kOrder><<<grid, kRouteThreads, 0, stream>>>(p);
  }
  cuda_check(cudaGetLastError(), "route_kernel launch");
}

}  // namespace
}  // namespace cuda_step

void route_top_k_cuda(const TensorView& logits, const TensorView& experts, const TensorView& weights,
                      const RouteCudaOptions& opts, Stream stream) {
  using namespace cuda_step;
  check_route_top_k_cuda(logits, experts, weights, opts);
  if (logits.shape[0] == 0) return;
  const DeviceGuard on(logits.device);
  const auto s = static_cast<cudaStream_t>(stream.handle);
  with_float_type(logits.dtype, [&](auto tag) {
    using T = decltype(tag);
    const RouteParams<T> p{logits.ptr<const T>(), logits.strides[0], experts.ptr<int32_t>(), weights.ptr<float>(),
                           logits.shape[0], int(logits.shape[1]), int(opts.top_k), opts.normalize};
    opts.order == RouteOrder::softmax_then_top_k ? launch<T, RouteOrder::softmax_then_top_k>(p, s)
                                                 : launch<T, RouteOrder::top_k_then_softmax>(p, s);
  });
}

}  // namespace attnzoo
