// DeepSeek's grouped routing launcher (routing_cuda.h); the kernel's body is grouped_routing_kernel.cuh.
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "core/error.h"
#include "layers/cuda/grouped_routing_kernel.cuh"
#include "layers/cuda/routing_cuda.h"

namespace attnzoo {
namespace cuda_step {
namespace {

template <class T, int kPerLane>
__global__ void __launch_bounds__(kRouteThreads) grouped_route_kernel(const GroupedRouteParams<T> p) {
  route_grouped_tokens<T, kPerLane>(p);
}

template <class T>
void launch_grouped(const GroupedRouteParams<T>& p, cudaStream_t stream) {
  const unsigned grid = grid_for(p.tokens, kWarpsPerBlock);
  // DeepSeek-V3 and its kin have 256 experts (8 per lane); V2-Lite 64.
  if (p.experts_per_token <= 128) {
    grouped_route_kernel<T, 4><<<grid, kRouteThreads, 0, stream>>>(p);
  } else if (p.experts_per_token <= 256) {
    grouped_route_kernel<T, 8><<<grid, kRouteThreads, 0, stream>>>(p);
  } else {
    grouped_route_kernel<T, 32><<<grid, kRouteThreads, 0, stream>>>(p);
  }
  cuda_check(cudaGetLastError(), "grouped_route_kernel launch");
}

}  // namespace
}  // namespace cuda_step

void route_grouped_top_k_cuda(const TensorView& logits, const TensorView& correction_bias, const TensorView& experts,
                              const TensorView& weights, const GroupedRouteCudaOptions& opts, Stream stream) {
  using namespace cuda_step;
  check_route_grouped_top_k_cuda(logits, correction_bias, experts, weights, opts);
  if (logits.shape[0] == 0) return;
  const DeviceGuard on(logits.device);
  const auto s = static_cast<cudaStream_t>(stream.handle);
  with_float_type(logits.dtype, [&](auto tag) {
    using T = decltype(tag);
    const GroupedRouteParams<T> p{logits.ptr<const T>(),
                                  logits.strides[0],
                                  correction_bias.empty() ? nullptr : correction_bias.ptr<const float>(),
                                  experts.ptr<int32_t>(),
                                  weights.ptr<float>(),
                                  logits.shape[0],
                                  int(logits.shape[1]),
                                  int(opts.top_k),
                                  int(opts.n_group),
                                  int(opts.topk_group),
                                  opts.softmax,
                                  opts.group_max,
                                  opts.norm_topk_prob,
                                  opts.routed_scaling_factor,
                                  opts.norm_epsilon};
    launch_grouped(p, s);
  });
}

}  // namespace attnzoo
