#pragma once
// The device side of Mamba-2's recurrence. Per token and head, with h the head's state [P, N]:
//   dt' = clamp(softplus?(dt + dt_bias));   h <- exp(A dt') h + dt' x B^T;   y = h C + D x;   y *= silu(z)
// The step transform runs here because the host cannot read dt, A, D or dt_bias in device memory.
//
// Work split: a CTA per (sequence, head, slice of kRowsPerCta state rows); warp w owns kRowsPerWarp rows of the
// slice, lane l the columns l, l + 32, ... of each (kColsPerLane of them, N <= 32 kColsPerLane), all in
// registers. A warp's load of one column stride of a row is one coalesced 128-byte segment; y of a row is a warp
// sum. Warps share nothing (B and C of a token are read by every warp from L1 / L2), so there is no block
// barrier, and a warp past the last row leaves at once. The state is read once before the first token and
// written once after the last: at decode the kernel moves the state and little else, so it is bandwidth-bound.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/linear/common/cuda/float_elem.cuh"
#include "kernels/linear/common/cuda/warp_reduce.cuh"
#include "kernels/linear/mamba2/cuda/mamba2_recurrent_launch.h"

namespace attnzoo::cuda_mamba2 {

using cuda_linear::bits_to_float;
using cuda_linear::load_bits;
using cuda_linear::store_elem;
using cuda_linear::warp_sum;

// ssm::StepTransform on the device (softplus linear above 20, as the host's).
__device__ __forceinline__ float step_size(const Params& p, float dt_raw, float bias) {
  float dt = dt_raw + bias;
  if (p.dt_softplus) dt = dt > 20.f ? dt : log1pf(expf(dt));
  if (p.dt_limit) dt = fminf(fmaxf(dt, p.dt_min), p.dt_max);
  return dt;
}

template <int kColsPerLane>
__device__ __forceinline__ void mamba2_recurrent_warp(const Params& p) {
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
  int64_t cta = blockIdx.x;
  const int slice = int(cta % p.slices);
  cta /= p.slices;
  const int h = int(cta % p.H);
  const int64_t n = cta / p.H;
  const int g = h / p.heads_per_group;
  const int row0 = slice * kRowsPerCta + warp * kRowsPerWarp;
  if (row0 >= p.P) return;

  int64_t begin = n * p.T, length = p.T;
  if (p.seq_offsets) begin = p.seq_offsets[n], length = p.seq_offsets[n + 1] - begin;

  // Columns and rows past N and P hold zeros (their B and C read as 0, so they stay zero) and are never stored.
  // A pool-addressed state (state_batch_indices): a negative row is a padded batch row, left untouched.
  const int64_t slot = p.state_indices ? int64_t(p.state_indices[n]) : n;
  if (slot < 0) return;
  const int64_t state_at = slot * p.state_stride + (int64_t(h) * p.P + row0) * p.N;  // element (row0, 0) of the head
  float s[kRowsPerWarp][kColsPerLane];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int j = 0; j < kColsPerLane; ++j) {
      const int col = lane + 32 * j;
      s[r][j] = p.initial_state && row0 + r < p.P && col < p.N ? p.initial_state[state_at + int64_t(r) * p.N + col]
                                                               : 0.f;
    }
  // Lane r < kRowsPerWarp finishes row r's output (skip, gate, store), so a warp's rows go out in one store.
  const bool finishes = lane < kRowsPerWarp && row0 + lane < p.P;
  const uint32_t D_bits =
      p.D && finishes ? load_bits(p.D, p.D_t, p.D_per_channel ? int64_t(h) * p.P + row0 + lane : h) : 0u;
  const uint32_t A_bits = load_bits(p.A, p.A_t, h);
  const uint32_t bias_bits = p.dt_bias ? load_bits(p.dt_bias, p.dt_bias_t, h) : 0u;
  const float D = bits_to_float(D_bits, p.D_t), A = bits_to_float(A_bits, p.A_t);
  const float bias = bits_to_float(bias_bits, p.dt_bias_t);

  for (int64_t t = 0; t < length; ++t) {
    const int64_t row = begin + t;
    const int64_t x_at = (row * p.H + h) * p.P + row0;  // element (row0) of this token's x, z and y
    // Every input of the token leaves before any is converted (load_bits): a conversion waits for its load.
    const uint32_t dt_bits = load_bits(p.dt, p.dt_t, row * p.H + h);
    const uint32_t z_bits = finishes && p.z ? load_bits(p.z, p.z_t, x_at + lane) : 0u;
    uint32_t b_bits[kColsPerLane], c_bits[kColsPerLane], x_bits[kRowsPerWarp];
#pragma unroll
    for (int j = 0; j < kColsPerLane; ++j) {
      const int col = lane + 32 * j;
      const int64_t at = (row * p.G + g) * p.N + col;
      b_bits[j] = col < p.N ? load_bits(p.B, p.B_t, at) : 0u;  // zero bits are 0.f in every dtype
      c_bits[j] = col < p.N ? load_bits(p.C, p.C_t, at) : 0u;
    }
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) x_bits[r] = row0 + r < p.P ? load_bits(p.x, p.x_t, x_at + r) : 0u;

    const float dt = step_size(p, bits_to_float(dt_bits, p.dt_t), bias);
    const float decay = expf(A * dt);
    float b[kColsPerLane], c[kColsPerLane];
#pragma unroll
    for (int j = 0; j < kColsPerLane; ++j) {
      b[j] = bits_to_float(b_bits[j], p.B_t);
      c[j] = bits_to_float(c_bits[j], p.C_t);
    }
    float y = 0.f, x_own = 0.f;
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const float x = bits_to_float(x_bits[r], p.x_t);
      const float coef = dt * x;
      float acc = 0.f;
#pragma unroll
      for (int j = 0; j < kColsPerLane; ++j) {
        s[r][j] = fmaf(coef, b[j], decay * s[r][j]);
        acc = fmaf(s[r][j], c[j], acc);
      }
      const float sum = warp_sum(acc);
      if (lane == r) y = sum, x_own = x;
    }
    if (finishes) {
      y = fmaf(D, x_own, y);
      if (p.z) {
        const float z = bits_to_float(z_bits, p.z_t);
        y *= z / (1.f + expf(-z));
      }
      store_elem(p.y, p.y_t, x_at + lane, y);
    }
  }

  if (!p.final_state) return;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int j = 0; j < kColsPerLane; ++j) {
      const int col = lane + 32 * j;
      if (row0 + r < p.P && col < p.N) p.final_state[state_at + int64_t(r) * p.N + col] = s[r][j];
    }
}

}  // namespace attnzoo::cuda_mamba2
