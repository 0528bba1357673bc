#pragma once
// Causal short convolution (Mamba, DeltaNet, GLA-style token mixing): a depthwise convolution over time of
// width W (typically 2-4) with a cached tail for decode.
//   y[t, d] = act(bias[d] + sum_{w < W} weight[d, w] * x[t - (W - 1) + w, d])
// x [B, T, D] (or packed with cu_seqlens, B = 1); weight [D, W]; bias [D] (may be empty); y [B, T, D].
// States [N, D, S] f32 with S >= W - 1 hold the last S inputs of each sequence, oldest first (causal-conv1d's
// layout; S = W also reads fla's [N, D, W] caches). Inputs before the state (or with no state) are zeros.
// act: none or SiLU. x / weight / bias f32, bf16 or f16; y in its own dtype.
#include <cstdint>

#include "core/tensor.h"

namespace attnzoo {

enum class ConvActivation { none, silu };

struct CausalConv1dOptions {
  TensorView bias;            // [D], may be empty
  TensorView initial_state;   // [N, D, S] f32, may be empty
  TensorView final_state;     // [N, D, S] f32, may be empty; may alias initial_state (updated in place)
  // What errors call the two states: a decode step's one in-place state goes through these checks as both.
  const char* initial_state_name = "initial_state";
  const char* final_state_name = "final_state";
  ConvActivation activation = ConvActivation::none;
  const int32_t* cu_seqlens = nullptr;
  int64_t cu_seqlens_len = 0;
  // States in a pool (as causal_conv1d_update's; GPU tensors only): initial_state and final_state are one
  // [slots, D, S] f32 tensor with any row stride, sequence n starts from and leaves its state in row
  // conv_state_indices[n] (int32 [N] in device memory), and a negative index is a pad (neither its slot nor its y
  // rows are touched).
  const int32_t* conv_state_indices = nullptr;
};

// Prefill. Runs where the tensors live (all on x's device): the CPU, or a GPU in a CUDA build
// (cuda/conv_prefill_cuda.h); the reference runs on the CPU only and refuses device tensors by name.
void causal_conv1d(const TensorView& x, const TensorView& weight, const TensorView& y,
                   const CausalConv1dOptions& opts);
void causal_conv1d_reference(const TensorView& x, const TensorView& weight, const TensorView& y,
                             const CausalConv1dOptions& opts);

// One decode step (or L speculative tokens) per sequence: x [N, D] or [N, L, D]; conv_state [N, D, S] f32 is
// read and advanced in place; y has x's shape. Runs on the CPU or a GPU, as causal_conv1d.
// With conv_state_indices (vLLM's; int32 [N] in device memory, GPU tensors only) the states live in a pool:
// conv_state is [slots, D, S] with any row stride (the pool's slot stride; each row's [D, S] contiguous), sequence
// n reads and advances row conv_state_indices[n] in place, and a negative index skips the sequence (neither its
// state nor its y is touched: a padded batch row).
void causal_conv1d_update(const TensorView& x, const TensorView& conv_state, const TensorView& weight,
                          const TensorView& bias, const TensorView& y, ConvActivation activation,
                          const int32_t* conv_state_indices = nullptr);

}  // namespace attnzoo
