// RoPE launcher (rope_cuda.h); the kernel's body is rope_kernel.cuh.
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "core/error.h"
#include "layers/cuda/rope_cuda.h"
#include "layers/cuda/rope_kernel.cuh"
#include "layers/cuda/rows.h"

namespace attnzoo {
namespace cuda_step {
namespace {

template <class T, class Pos, int N, bool kInterleaved>
__global__ void __launch_bounds__(kRopeThreads) rope_kernel(const RopeParams<T, Pos> p) {
  extern __shared__ float angles[];  // cos [half], then sin [half]
  rope_tokens<T, Pos, N, kInterleaved>(p, angles);
}

HeadsMap heads_map(const TensorView& t) {
  if (t.empty()) return {};
  return {t.shape[1], t.strides[0], t.strides[1]};
}

// 16-byte accesses need every head start and every unit 16-byte aligned.
bool heads_vectorizable(const TensorView& t, const HeadsMap& m, int64_t unit_stride_elems, size_t elem_bytes) {
  if (t.empty()) return true;
  const int64_t vec = int64_t(16 / elem_bytes);
  return reinterpret_cast<uintptr_t>(t.data) % 16 == 0 && m.token_stride % vec == 0 &&
         (m.heads <= 1 || m.head_stride % vec == 0) && unit_stride_elems % vec == 0;
}

template <class T, class Pos, int N, bool kInterleaved>
void launch(const RopeParams<T, Pos>& p, cudaStream_t stream) {
  const size_t smem = size_t(2 * p.half) * sizeof(float);
  rope_kernel<T, Pos, N, kInterleaved><<<grid_for(p.tokens, 1), kRopeThreads, smem, stream>>>(p);
  cuda_check(cudaGetLastError(), "rope_kernel launch");
}

}  // namespace
}  // namespace cuda_step

void RopeCuda::apply(const TensorView& q, const TensorView& k, const TensorView& positions, Stream stream) const {
  using namespace cuda_step;
  check(q, k, positions);
  const int64_t rotary_dim = rope_.rotary_dim();
  const bool interleaved = rope_.config().layout == RopeLayout::interleaved;
  if (rotary_dim == 0 || q.shape[0] == 0) return;  // NoPE, or no tokens
  const DeviceGuard on(device_);
  const auto s = static_cast<cudaStream_t>(stream.handle);
  with_float_type(q.dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = 16 / sizeof(T);
    auto run = [&](auto pos_tag) {
      using Pos = decltype(pos_tag);
      const RopeParams<T, Pos> p{q.ptr<T>(), k.empty() ? nullptr : k.ptr<T>(), heads_map(q), heads_map(k),
                                 positions.ptr<const Pos>(), inv_freq_.as<const float>(), q.shape[0],
                                 int(rotary_dim / 2), rope_.attention_scale()};
      // Half layout: a unit's two accesses start at i0 and half + i0, so half must be whole vectors;
      // interleaved: units tile [0, rotary_dim).
      const int64_t unit_stride = interleaved ? rotary_dim : rotary_dim / 2;
      const bool vec = heads_vectorizable(q, p.q_map, unit_stride, sizeof(T)) &&
                       heads_vectorizable(k, p.k_map, unit_stride, sizeof(T));
      if (interleaved) {
        vec ? launch<T, Pos, V, true>(p, s) : launch<T, Pos, 1, true>(p, s);
      } else {
        vec ? launch<T, Pos, V, false>(p, s) : launch<T, Pos, 1, false>(p, s);
      }
    };
    positions.dtype == DType::i32 ? run(int32_t{}) : run(int64_t{});
  });
}

}  // namespace attnzoo
