#pragma once
// The validated form of a causal_conv1d call, shared by the reference and the vectorised kernel.
#include <vector>

#include "kernels/linear/common/sequences.h"
#include "kernels/linear/short_conv/short_conv.h"

namespace attnzoo {

struct ConvProblem {
  const void* x = nullptr;
  DType x_dtype = DType::f32;
  void* y = nullptr;
  DType y_dtype = DType::f32;
  int64_t D = 0, W = 0, S = 0;           // channels, width, state length (0 when no state is given)
  std::vector<float> weight_t;           // [W, D] (transposed so a tap is one contiguous row)
  std::vector<float> bias;               // [D] (zeros when absent)
  const float* initial_state = nullptr;  // [N, D, S]
  float* final_state = nullptr;
  ConvActivation activation = ConvActivation::none;
  SequenceSpans seqs;
};

ConvProblem make_conv_problem(const TensorView& x, const TensorView& weight, const TensorView& y,
                              const CausalConv1dOptions& opts);
void run_causal_conv1d(const ConvProblem& p);  // vectorised (conv.cc)

}  // namespace attnzoo
