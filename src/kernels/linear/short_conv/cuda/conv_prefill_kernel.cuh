#pragma once
// The device side of the short convolution's prefill. For sequence n (rows [begin, end)), channel d and token
// t < len = end - begin, with input(i) the sequence's i-th input (i < 0: initial-state entry S + i, or 0 before
// the state or without one):
//   y[begin + t, d] = act(bias[d] + sum_{w < W} weight[d, w] input(t - (W - 1) + w))
//   final_state[n, d, s] = input(len - S + s)   for s < S
// Outputs: a thread block per (tile of up to kTileTokens tokens of one sequence, kThreads channels), a thread per
// channel walking the tile's tokens with the last kWindow inputs and the taps in registers (right-aligned, the
// taps past W zero), so each input is loaded once per tile plus a halo of W - 1, and a warp's loads and stores of
// a token row are consecutive channels. The final states are a second launch: a thread per (sequence, channel),
// after every output thread has read the initial state, which the final state may alias. With pool states
// (conv_state_indices) both are the sequence's slot, and a pad's threads return at once.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/linear/common/cuda/float_elem.cuh"
#include "kernels/linear/short_conv/cuda/conv_prefill_launch.h"

namespace attnzoo::cuda_conv_prefill {

using cuda_linear::load_elem;
using cuda_linear::store_elem;

// Where sequence n's [D, S] state starts: row n of the dense states, or its pool slot; -1 for a pad.
__device__ __forceinline__ int64_t state_at(const Params& p, int64_t n) {
  if (!p.state_indices) return n * p.state_stride;
  const int32_t slot = p.state_indices[n];
  return slot < 0 ? -1 : int64_t(slot) * p.state_stride;
}

// Input i of sequence n at channel d (see above); `begin` is the sequence's first row, `at` its state_at.
__device__ __forceinline__ float conv_input(const Params& p, int64_t at, int64_t d, int64_t begin, int64_t i) {
  if (i >= 0) return load_elem(p.x, p.x_t, (begin + i) * p.D + d);
  return p.initial_state && i >= -p.S ? p.initial_state[at + d * p.S + p.S + i] : 0.f;
}

template <int kWindow>
__device__ __forceinline__ void conv_prefill_output_thread(const Params& p) {
  const int64_t tile = int64_t(blockIdx.x) / p.channel_blocks;
  const int64_t d = int64_t(blockIdx.x % unsigned(p.channel_blocks)) * kThreads + threadIdx.x;
  if (d >= p.D) return;
  const int64_t* tiles = tiles_of(p);
  const int64_t n = tiles[2 * tile], row0 = tiles[2 * tile + 1];
  const int64_t at = state_at(p, n);
  if (at < 0) return;  // a pad: its y rows stay as they are
  const int64_t begin = p.seq_offsets[n], end = p.seq_offsets[n + 1];
  const int64_t row_end = row0 + kTileTokens < end ? row0 + kTileTokens : end;

  // win[kWindow - 1] is the current token's input, win[kWindow - 1 - j] the one j tokens before; tap w of W
  // multiplies the input W - 1 - w tokens before, so it sits at kWindow - W + w.
  float taps[kWindow], win[kWindow];
#pragma unroll
  for (int i = 0; i < kWindow; ++i) {
    const int w = i - (kWindow - p.W);
    taps[i] = w >= 0 ? load_elem(p.weight, p.weight_t, d * p.W + w) : 0.f;
  }
  const float bias = p.bias ? load_elem(p.bias, p.bias_t, d) : 0.f;
  const int64_t t0 = row0 - begin;
  win[0] = 0.f;  // shifted out before it is read
#pragma unroll
  for (int i = 1; i < kWindow; ++i) win[i] = conv_input(p, at, d, begin, t0 - (kWindow - i));

  for (int64_t row = row0; row < row_end; ++row) {
#pragma unroll
    for (int i = 0; i + 1 < kWindow; ++i) win[i] = win[i + 1];
    win[kWindow - 1] = load_elem(p.x, p.x_t, row * p.D + d);
    float acc = bias;
#pragma unroll
    for (int i = 0; i < kWindow; ++i) acc = fmaf(taps[i], win[i], acc);
    if (p.silu) acc = acc / (1.f + expf(-acc));
    store_elem(p.y, p.y_t, row * p.D + d, acc);
  }
}

__device__ __forceinline__ void conv_prefill_state_thread(const Params& p) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.N * p.D) return;
  const int64_t n = i / p.D, d = i % p.D;
  const int64_t begin = p.seq_offsets[n], len = p.seq_offsets[n + 1] - begin;
  const int64_t at = state_at(p, n);
  if (at < 0) return;  // a pad: its slot is not touched
  float* state = p.final_state + at + d * p.S;
  // Entry s takes input len - S + s, which sits at initial-state index len + s >= s when it is still a state
  // entry: in increasing s every read precedes the write that would clobber it when the states alias.
  for (int s = 0; s < p.S; ++s) state[s] = conv_input(p, at, d, begin, len - p.S + s);
}

}  // namespace attnzoo::cuda_conv_prefill
