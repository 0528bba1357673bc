#pragma once
// The dtype check every float kernel family's argument validation shares (softmax, the delta and GLA families,
// the state-space scans, the short convolution, the CUDA step kernels' checks), so that they accept the same types
// and say so in the same words.
#include "core/tensor.h"

namespace attnzoo {

// DTypeError naming `name` unless `t` holds float32, bfloat16 or float16, the inputs the float kernels widen to f32
// as they read them. Reads the dtype alone, so it takes tensors on any device.
void require_float_dtype(const TensorView& t, const char* name);

}  // namespace attnzoo
