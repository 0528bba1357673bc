#pragma once
// The CUDA short-convolution decode step's launch, decided on the host: the kernel's parameters and grid for a
// validated problem. Plain C++: conv_update.cu launches; the kernel emulator (testing/cuda_emulation) runs the
// same parameters through the same kernel code (conv_update_kernel.cuh).
#include <cstdint>

#include "kernels/linear/common/cuda/float_elem.h"
#include "kernels/linear/short_conv/conv_problem.h"

namespace attnzoo::cuda_conv {

using cuda_linear::Elem;
using cuda_linear::elem_of;

constexpr int kThreads = 128;

struct Params {
  const void *x, *weight, *bias;  // bias may be null
  void* y;
  Elem x_t, weight_t, bias_t, y_t;
  float* state;  // [N, D, S], read then advanced
  const int32_t* state_indices;  // sequence n's state row (negative: skip the sequence); null: row n
  int64_t state_stride;          // floats between state rows
  int64_t N, L, D;
  int W, S;
  bool silu;
};

struct UpdateLaunch {
  bool empty = true;               // nothing to run: no sequences or no channels
  Params params{};
  unsigned grid = 0, threads = 0;  // one-dimensional
};

// For a problem check_cuda_conv_update accepts.
UpdateLaunch plan_conv_update(const ConvProblem& p);

}  // namespace attnzoo::cuda_conv
