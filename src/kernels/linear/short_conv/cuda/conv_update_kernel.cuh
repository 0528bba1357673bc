#pragma once
// The device side of the short convolution's decode step. For sequence n, channel d and new token t < L, with
// input(i) the i-th input counted from the first new token (i < 0: state entry S + i, or 0 before the state):
//   y[n, t, d] = act(bias[d] + sum_{w < W} weight[d, w] input(t - (W - 1) + w))
//   state[n, d, s] <- input(L - S + s)   for s < S
// A thread per (sequence, channel): consecutive threads read consecutive channels of x and y (coalesced), and a
// warp's S-entry state rows are one contiguous 32 S floats. Work per thread is a few dozen flops: the step is
// bound by launch latency and bandwidth, so the simple mapping is the right one.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/linear/common/cuda/float_elem.cuh"
#include "kernels/linear/short_conv/cuda/conv_update_launch.h"

namespace attnzoo::cuda_conv {

using cuda_linear::load_elem;
using cuda_linear::store_elem;

__device__ __forceinline__ void conv_update_thread(const Params& p) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.N * p.D) return;
  const int64_t n = i / p.D, d = i % p.D;
  // A pool-addressed state (conv_state_indices): a negative row is a padded batch row, left untouched.
  const int64_t slot = p.state_indices ? int64_t(p.state_indices[n]) : n;
  if (slot < 0) return;
  float* state = p.state + slot * p.state_stride + d * p.S;  // this (sequence, channel)'s S entries, oldest first
  auto input = [&](int64_t t) -> float {  // t counted from the first new token, may be negative
    if (t >= 0) return load_elem(p.x, p.x_t, (n * p.L + t) * p.D + d);
    return t >= -p.S ? state[p.S + t] : 0.f;
  };
  const float bias = p.bias ? load_elem(p.bias, p.bias_t, d) : 0.f;
  for (int64_t t = 0; t < p.L; ++t) {
    float acc = bias;
    for (int w = 0; w < p.W; ++w)
      acc = fmaf(load_elem(p.weight, p.weight_t, d * p.W + w), input(t - (p.W - 1) + w), acc);
    if (p.silu) acc = acc / (1.f + expf(-acc));
    store_elem(p.y, p.y_t, (n * p.L + t) * p.D + d, acc);
  }
  // Entry s takes input L - S + s, which sits at state index L + s >= s when it is still a state entry: in
  // increasing s every read precedes the write that would clobber it.
  for (int s = 0; s < p.S; ++s) state[s] = input(p.L - p.S + s);
}

}  // namespace attnzoo::cuda_conv
