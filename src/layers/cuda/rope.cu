// RoPE launcher (rope_cuda.h); the kernel's body is rope_kernel.cuh.
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "core/error.h"
#include "layers/cuda/rope_cuda.h"
#include "layers/cuda/rope_kernel.cuh"
#include "layers/cuda/rope_launch.h"

namespace attnzoo {
namespace cuda_step {
namespace {

template <class T, class Pos, int N, bool kInterleaved>
__global__ void __launch_bounds__(kRopeThreads) rope_kernel(const RopeParams<T, Pos> p) {
  extern __shared__ float angles[];  // cos [half], then sin [half]
  rope_tokens<T, Pos, N, kInterleaved>(p, angles);
}

template <class T, class Pos, int N, bool kInterleaved>
void launch(const RopeParams<T, Pos>& p, size_t smem_bytes, cudaStream_t stream) {
  rope_kernel<T, Pos, N, kInterleaved><<<grid_for(p.tokens, 1), kRopeThreads, smem_bytes, stream>>>(p);
  cuda_check(cudaGetLastError(), "rope_kernel launch");
}

}  // namespace
}  // namespace cuda_step

void RopeCuda::apply(const TensorView& q, const TensorView& k, const TensorView& positions, Stream stream) const {
  using namespace cuda_step;
  check(q, k, positions);
  if (rope_.rotary_dim() == 0 || q.shape[0] == 0) return;  // NoPE, or no tokens
  const DeviceGuard on(device_);
  const auto s = static_cast<cudaStream_t>(stream.handle);
  const RopeLaunch l = plan_rope(rope_, q, k);
  with_float_type(q.dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = 16 / sizeof(T);
    auto run = [&](auto pos_tag) {
      using Pos = decltype(pos_tag);
      const RopeParams<T, Pos> p{q.ptr<T>(), k.empty() ? nullptr : k.ptr<T>(), l.q_map, l.k_map,
                                 positions.ptr<const Pos>(), inv_freq_.as<const float>(), q.shape[0], l.half,
                                 l.scale};
      const size_t smem = l.smem_bytes;
      if (l.interleaved) {
        l.vectorized ? launch<T, Pos, V, true>(p, smem, s) : launch<T, Pos, 1, true>(p, smem, s);
      } else {
        l.vectorized ? launch<T, Pos, V, false>(p, smem, s) : launch<T, Pos, 1, false>(p, smem, s);
      }
    };
    positions.dtype == DType::i32 ? run(int32_t{}) : run(int64_t{});
  });
}

}  // namespace attnzoo
