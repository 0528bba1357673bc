// RoPE kernel (rope_cuda.h). One block per token: its cos / sin are computed once into shared memory, then every
// head of q and k rotates from there, so the double-precision sincos (the CPU's Rope::angles, matched for
// agreement to the last bit of the angle) costs rotary_dim / 2 per token, not per head.
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "core/error.h"
#include "layers/cuda/rope_cuda.h"
#include "layers/cuda/rows.h"
#include "layers/cuda/step_kernels.cuh"

namespace attnzoo {
namespace cuda_step {
namespace {

constexpr int kRopeThreads = 128;

struct HeadsMap {
  int64_t heads = 0, token_stride = 0, head_stride = 0;
};

template <class T, class Pos>
struct RopeParams {
  T* q;
  T* k;  // null: q only
  HeadsMap q_map, k_map;
  const Pos* positions;
  const float* inv_freq;
  int64_t tokens;
  int half;  // rotary_dim / 2
  float scale;
};

// Pairs (i, i + half) in the half layout, (2i, 2i + 1) interleaved. A unit is what one thread rotates: N pairs
// read as two N-element accesses (half layout), or 2N elements holding N pairs read as one access (interleaved;
// two scalar accesses when N is 1).
template <class T, int N, bool kInterleaved>
__device__ __forceinline__ void rotate_unit(T* head, int unit, int half, const float* cos_, const float* sin_) {
  if constexpr (!kInterleaved) {
    const int i0 = unit * N;
    float a[N], b[N];
    load<N>(head + i0, a);
    load<N>(head + half + i0, b);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const float c = cos_[i0 + j], s = sin_[i0 + j], x = a[j], y = b[j];
      a[j] = x * c - y * s;
      b[j] = y * c + x * s;
    }
    store<N>(head + i0, a);
    store<N>(head + half + i0, b);
  } else {
    constexpr int kElems = N == 1 ? 2 : N;
    const int e0 = unit * kElems;
    float v[kElems];
    if constexpr (N == 1) {
      float lo[1], hi[1];
      load<1>(head + e0, lo);
      load<1>(head + e0 + 1, hi);
      v[0] = lo[0];
      v[1] = hi[0];
    } else {
      load<N>(head + e0, v);
    }
#pragma unroll
    for (int j = 0; j < kElems / 2; ++j) {
      const int i = e0 / 2 + j;
      const float c = cos_[i], s = sin_[i], x = v[2 * j], y = v[2 * j + 1];
      v[2 * j] = x * c - y * s;
      v[2 * j + 1] = y * c + x * s;
    }
    if constexpr (N == 1) {
      const float lo[1] = {v[0]}, hi[1] = {v[1]};
      store<1>(head + e0, lo);
      store<1>(head + e0 + 1, hi);
    } else {
      store<N>(head + e0, v);
    }
  }
}

template <class T, class Pos, int N, bool kInterleaved>
__global__ void __launch_bounds__(kRopeThreads) rope_kernel(const RopeParams<T, Pos> p) {
  extern __shared__ float angles[];  // cos [half], then sin [half]
  float* cos_ = angles;
  float* sin_ = angles + p.half;
  const int units = kInterleaved ? 2 * p.half / (N == 1 ? 2 : N) : p.half / N;
  const int64_t q_work = p.q_map.heads * units, work = q_work + (p.k ? p.k_map.heads * units : 0);
  for (int64_t t = blockIdx.x; t < p.tokens; t += gridDim.x) {
    __syncthreads();  // the previous token's rotations are done with the table
    // As Rope::angles: the angle rounded to f32 (transformers' position * inv_freq), its cos / sin in double.
    const float position = float(p.positions[t]);
    for (int i = int(threadIdx.x); i < p.half; i += kRopeThreads) {
      const float angle = position * p.inv_freq[i];
      double s, c;
      sincos(double(angle), &s, &c);
      cos_[i] = float(c) * p.scale;
      sin_[i] = float(s) * p.scale;
    }
    __syncthreads();
    for (int64_t w = threadIdx.x; w < work; w += kRopeThreads) {
      const bool is_q = w < q_work;
      const int64_t local = is_q ? w : w - q_work;
      const HeadsMap& m = is_q ? p.q_map : p.k_map;
      T* head = (is_q ? p.q : p.k) + t * m.token_stride + (local / units) * m.head_stride;
      rotate_unit<T, N, kInterleaved>(head, int(local % units), p.half, cos_, sin_);
    }
  }
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
