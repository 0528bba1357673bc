#pragma once
// What the chunked gated linear recurrence's prep and state kernels share: the chunked delta rule's tensor-core
// fragments and copies (delta_chunk_mma.cuh) and the state slice's steps (chunk_state_slice.cuh), named into this
// namespace one by one, the feature map and Mamba-2's step on the device. (The output kernel is the delta rule's own,
// delta_chunk_output.cuh's chunk_output.)
#include "kernels/linear/common/cuda/chunk_state_slice.cuh"
#include "kernels/linear/common/cuda/delta_chunk_mma.cuh"
#include "kernels/linear/common/cuda/gla_chunk_launch.h"

namespace attnzoo::cuda_gla_chunk {

using cuda_delta_chunk::acc_col;
using cuda_delta_chunk::acc_row;
using cuda_delta_chunk::Bf16;
using cuda_delta_chunk::copy_rows;
using cuda_delta_chunk::decay_and_add;
using cuda_delta_chunk::sequence_state_at;
using cuda_delta_chunk::load_a_trans;
using cuda_delta_chunk::load_b_kn;
using cuda_delta_chunk::load_state;
using cuda_delta_chunk::mma_16x16;
using cuda_delta_chunk::state_slice;
using cuda_delta_chunk::StateRegs;
using cuda_delta_chunk::StateSlice;
using cuda_delta_chunk::store_h;
using cuda_delta_chunk::store_state;

// phi of the feature map, on the device (gla_rows.h's apply_feature_map).
struct FeatureMapFn {
  FeatureMap f;
  __device__ __forceinline__ float operator()(float x) const {
    switch (f) {
      case FeatureMap::elu_plus_one: return x > 0.f ? x + 1.f : expf(x);
      case FeatureMap::relu: return fmaxf(x, 0.f);
      default: return x;
    }
  }
};

// Mamba-2's step dt' = clamp(softplus?(dt + dt_bias)) (ssm::StepTransform on the device: softplus is linear
// above 20, as the host's).
__device__ __forceinline__ float ssd_step(const SsdParams& s, int64_t at, int hv) {
  float dt = cuda_linear::load_elem(s.dt, s.dt_t, at);
  if (s.dt_bias) dt += cuda_linear::load_elem(s.dt_bias, s.dt_bias_t, hv);
  if (s.dt_softplus) dt = dt > 20.f ? dt : log1pf(expf(dt));
  if (s.dt_limit) dt = fminf(fmaxf(dt, s.dt_min), s.dt_max);
  return dt;
}

}  // namespace attnzoo::cuda_gla_chunk
