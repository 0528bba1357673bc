#pragma once
// The validated form of a causal_conv1d call, shared by the reference, the vectorised kernel and the CUDA prefill
// and decode step. Device-neutral: for tensors on a GPU only shapes are read (weight_t and bias stay empty; the device
// kernel reads weight_in and bias_in there).
#include <vector>

#include "kernels/linear/common/sequences.h"
#include "kernels/linear/short_conv/short_conv.h"

namespace attnzoo {

struct ConvProblem {
  Device device{};  // where every tensor lives (make_conv_problem checks they agree)
  const void* x = nullptr;
  DType x_dtype = DType::f32;
  void* y = nullptr;
  DType y_dtype = DType::f32;
  int64_t D = 0, W = 0, S = 0;           // channels, width, state length (0 when no state is given)
  std::vector<float> weight_t;           // [W, D] (transposed so a tap is one contiguous row); host only
  std::vector<float> bias;               // [D] (zeros when absent); host only
  TensorView weight_in, bias_in;         // as given: [D, W], [D] or empty
  const float* initial_state = nullptr;  // [N, D, S], or the pool's rows with state_indices
  float* final_state = nullptr;
  const int32_t* state_indices = nullptr;  // causal_conv1d_update's conv_state_indices (device memory), or null
  int64_t state_stride = 0;                // floats from one sequence's state row to the next (D S when dense)
  ConvActivation activation = ConvActivation::none;
  SequenceSpans seqs;
};

ConvProblem make_conv_problem(const TensorView& x, const TensorView& weight, const TensorView& y,
                              const CausalConv1dOptions& opts);
void run_causal_conv1d(const ConvProblem& p);  // vectorised (conv.cc)
// causal_conv1d_update's problem: x, y [N, L, D], the state advanced in place (see causal_conv1d_update for
// conv_state_indices).
ConvProblem make_conv_update_problem(const TensorView& x, const TensorView& conv_state, const TensorView& weight,
                                     const TensorView& bias, const TensorView& y, ConvActivation activation,
                                     const int32_t* conv_state_indices);

// Runs a validated decode step (padded sequences, final_state == initial_state) whose tensors live on a GPU, on
// the current stream of their device. DeviceError in a build without CUDA.
void conv_update_on_device(const ConvProblem& p);
// Runs a validated prefill (packed or padded sequences, optional initial / final states, which may alias) whose
// tensors live on a GPU, on the current stream of their device. DeviceError in a build without CUDA.
void conv_prefill_on_device(const ConvProblem& p);

}  // namespace attnzoo
