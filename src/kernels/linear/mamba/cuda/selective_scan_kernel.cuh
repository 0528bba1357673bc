#pragma once
// The device side of Mamba's selective scan. Per token and channel d, with h the channel's N state entries:
//   dt = softplus?(delta + delta_bias[d]);   h[n] <- exp(dt A[d, n]) h[n] + dt B[n] u;   y = h . C + D[d] u;
//   y *= silu(z)
// The step transform runs here because the host cannot read A, D or delta_bias in device memory.
//
// Work split: sixteen lanes per channel (a half-warp), lane l holding entries l, l + 16, ... (kPerLane of them,
// N <= 16 kPerLane: Mamba's N = 16 is one entry per lane), so a half-warp's state load is 64 contiguous bytes
// per entry stride and y a 16-lane sum; a CTA of kThreads covers kChannels consecutive channels of one
// sequence. Lanes past D or N compute on zeros and store nothing: every lane reaches every shuffle. The state
// is read once before the first token and written once after the last.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/linear/common/cuda/float_elem.cuh"
#include "kernels/linear/mamba/cuda/selective_scan_launch.h"

namespace attnzoo::cuda_mamba {

using cuda_linear::bits_to_float;
using cuda_linear::load_bits;
using cuda_linear::store_elem;

// A sum over the 16 lanes of a half-warp (offsets below 16 never cross halves).
__device__ __forceinline__ float channel_sum(float x) {
  for (int offset = kLanesPerChannel / 2; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

template <int kPerLane>
__device__ __forceinline__ void selective_scan_channel(const Params& p) {
  const int lane = int(threadIdx.x) % kLanesPerChannel;
  const int64_t s = blockIdx.x / p.channel_blocks;
  const int d = int(blockIdx.x % p.channel_blocks) * kChannels + int(threadIdx.x) / kLanesPerChannel;
  const bool has_channel = d < p.D;
  const int g = has_channel ? d / p.channels_per_group : 0;

  int64_t b = s, begin = 0, length = p.L;
  if (p.seq_offsets) b = 0, begin = p.seq_offsets[s], length = p.seq_offsets[s + 1] - begin;

  // A pool-addressed state (state_batch_indices): a negative row is a padded batch row, whose CTA touches nothing.
  const int64_t slot = p.state_indices ? int64_t(p.state_indices[s]) : s;
  if (slot < 0) return;
  const int64_t state_at = slot * p.state_stride + int64_t(d) * p.N;  // entry 0 of this channel's state
  // Every load of a phase (the setup, then each token) leaves before any value is converted (load_bits): a
  // conversion waits for its load. Zero bits are 0.f in every dtype.
  float h[kPerLane], a[kPerLane];
  uint32_t a_bits[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int n = lane + kLanesPerChannel * j;
    const bool has = has_channel && n < p.N;
    h[j] = has && p.initial_state ? p.initial_state[state_at + n] : 0.f;
    a_bits[j] = has ? load_bits(p.A, p.A_t, int64_t(d) * p.N + n) : 0u;
  }
  const uint32_t skip_bits = has_channel && p.skip ? load_bits(p.skip, p.skip_t, d) : 0u;
  const uint32_t bias_bits = has_channel && p.delta_bias ? load_bits(p.delta_bias, p.delta_bias_t, d) : 0u;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) a[j] = bits_to_float(a_bits[j], p.A_t);
  const float skip = bits_to_float(skip_bits, p.skip_t), bias = bits_to_float(bias_bits, p.delta_bias_t);

  for (int64_t i = 0; i < length; ++i) {
    const int64_t t = begin + i;
    const int64_t at = (b * p.D + d) * p.L + t;  // (row, channel, position) in [Bt, D, L]
    const uint32_t u_bits = has_channel ? load_bits(p.u, p.u_t, at) : 0u;
    const uint32_t delta_bits = has_channel ? load_bits(p.delta, p.delta_t, at) : 0u;
    const uint32_t z_bits = lane == 0 && has_channel && p.z ? load_bits(p.z, p.z_t, at) : 0u;
    uint32_t b_bits[kPerLane], c_bits[kPerLane];
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int n = lane + kLanesPerChannel * j;
      const bool has = has_channel && n < p.N;
      const int64_t bc = ((b * p.G + g) * p.N + n) * p.L + t;  // (row, group, n, position) in B and C
      b_bits[j] = has ? load_bits(p.B, p.B_t, bc) : 0u;
      c_bits[j] = has ? load_bits(p.C, p.C_t, bc) : 0u;
    }
    const float u = bits_to_float(u_bits, p.u_t);
    float dt = has_channel ? bits_to_float(delta_bits, p.delta_t) + bias : 0.f;
    if (p.softplus) dt = dt > 20.f ? dt : log1pf(expf(dt));
    const float du = dt * u;
    float acc = 0.f;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const float bn = bits_to_float(b_bits[j], p.B_t), cn = bits_to_float(c_bits[j], p.C_t);
      h[j] = fmaf(expf(dt * a[j]), h[j], du * bn);
      acc = fmaf(h[j], cn, acc);
    }
    float y = channel_sum(acc);
    if (lane == 0 && has_channel) {
      y = fmaf(skip, u, y);
      if (p.z) {
        const float z = bits_to_float(z_bits, p.z_t);
        y *= z / (1.f + expf(-z));
      }
      store_elem(p.out, p.out_t, at, y);
    }
  }

  if (!p.final_state || !has_channel) return;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int n = lane + kLanesPerChannel * j;
    if (n < p.N) p.final_state[state_at + n] = h[j];
  }
}

}  // namespace attnzoo::cuda_mamba
