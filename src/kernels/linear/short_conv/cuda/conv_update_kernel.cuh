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

using cuda_linear::bits_to_float;
using cuda_linear::load_bits;
using cuda_linear::load_elem;
using cuda_linear::store_elem;

// Taps (and state entries) whose loads a thread issues together: a load's conversion, or a store that may alias
// the next load's address, makes the thread wait, so one at a time they cost a latency each (a dozen at W = 4).
constexpr int kInFlight = 4;

__device__ __forceinline__ void conv_update_thread(const Params& p) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.N * p.D) return;
  const int64_t n = i / p.D, d = i % p.D;
  // A pool-addressed state (conv_state_indices): a negative row is a padded batch row, left untouched.
  const int64_t slot = p.state_indices ? int64_t(p.state_indices[n]) : n;
  if (slot < 0) return;
  float* state = p.state + slot * p.state_stride + d * p.S;  // this (sequence, channel)'s S entries, oldest first
  // Input t counted from the first new token (may be negative): its bits (x's dtype, the state's f32, or zeros
  // before the state), then its value.
  auto input_bits = [&](int64_t t) -> uint32_t {
    if (t >= 0) return load_bits(p.x, p.x_t, (n * p.L + t) * p.D + d);
    return t >= -p.S ? __float_as_uint(state[p.S + t]) : 0u;
  };
  auto input_value = [&](int64_t t, uint32_t bits) {
    return t >= 0 ? bits_to_float(bits, p.x_t) : __uint_as_float(bits);
  };
  const float bias = p.bias ? load_elem(p.bias, p.bias_t, d) : 0.f;
  for (int64_t t = 0; t < p.L; ++t) {
    float acc = bias;
    for (int w0 = 0; w0 < p.W; w0 += kInFlight) {
      uint32_t weight_bits[kInFlight], in_bits[kInFlight];
#pragma unroll
      for (int k = 0; k < kInFlight; ++k) {
        const int w = w0 + k;
        weight_bits[k] = w < p.W ? load_bits(p.weight, p.weight_t, d * p.W + w) : 0u;
        in_bits[k] = w < p.W ? input_bits(t - (p.W - 1) + w) : 0u;
      }
#pragma unroll
      for (int k = 0; k < kInFlight; ++k) {
        const int w = w0 + k;
        if (w < p.W)
          acc = fmaf(bits_to_float(weight_bits[k], p.weight_t), input_value(t - (p.W - 1) + w, in_bits[k]), acc);
      }
    }
    if (p.silu) acc = acc / (1.f + expf(-acc));
    store_elem(p.y, p.y_t, (n * p.L + t) * p.D + d, acc);
  }
  // Entry s takes input L - S + s, which sits at state index L + s >= s when it is still a state entry: in
  // increasing s every read precedes the write that would clobber it, and a group's reads precede its writes.
  for (int s0 = 0; s0 < p.S; s0 += kInFlight) {
    uint32_t bits[kInFlight];
#pragma unroll
    for (int k = 0; k < kInFlight; ++k) bits[k] = s0 + k < p.S ? input_bits(p.L - p.S + s0 + k) : 0u;
#pragma unroll
    for (int k = 0; k < kInFlight; ++k)
      if (s0 + k < p.S) state[s0 + k] = input_value(p.L - p.S + s0 + k, bits[k]);
  }
}

}  // namespace attnzoo::cuda_conv
