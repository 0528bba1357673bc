#pragma once
// The decode projection as a model step on either device issues it: y [M, N] = x [M, K] w^T for the few
// activation rows of a step, computed where the tensors live. A QuantMatrix is borrowed bytes that do not say
// where they are, so the caller names w's device; x and y must be there too. On the CPU this is quant_gemv_f32
// (x float32, rows contiguous); on a GPU the CUDA kernels of cuda/gemv_cuda.h (x and y float32, bfloat16 or float16, M <= 8,
// BF16 / F16 / Q8_0 / Q4_0 / Q4_1 / Q4_K / Q5_K / Q6_K), on the current stream. Linear (layers/linear.h) still
// calls quant_gemv_f32 directly: its weights are host memory until the models move to the GPU (issue 27).
#include "core/device.h"
#include "core/tensor.h"
#include "kernels/quant/quant.h"

namespace attnzoo {

// ArgumentError / DTypeError naming w, x or y; DeviceError for a CUDA w in a build without CUDA.
void quant_gemv_tensors(const QuantMatrix& w, Device w_device, const TensorView& x, const TensorView& y);

}  // namespace attnzoo
