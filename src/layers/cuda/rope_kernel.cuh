#pragma once
// The device side of the RoPE kernel (rope.cu launches it; rope_cuda.h has the contract). One block per token: its
// cos / sin are computed once into shared memory, then every head of q and k rotates from there, so the
// double-precision sincos (the CPU's Rope::angles, matched for agreement to the last bit of the angle) costs
// rotary_dim / 2 per token, not per head.
#include "layers/cuda/rope_launch.h"
#include "layers/cuda/step_kernels.cuh"

namespace attnzoo::cuda_step {

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

// `angles`: 2 * half floats of shared memory, cos [half] then sin [half].
template <class T, class Pos, int N, bool kInterleaved>
__device__ __forceinline__ void rope_tokens(const RopeParams<T, Pos>& p, float* angles) {
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

}  // namespace attnzoo::cuda_step
