#pragma once
// RMSNorm on an NVIDIA GPU, the twin of layers/norm.h: y = x / sqrt(mean(x^2) + eps) * w over rows of `dim`, f32
// math, activations f32 / bf16 / f16 in and out (one dtype for x, y and residual, except that an f32 x may give a
// bf16 / f16 y: the residual stream's norm as the projections' 16-bit input), the weight f32 with any Gemma
// (1 + w) already folded in (as RmsNorm::weight() holds it). The fused form is vLLM's fused_add_rms_norm: the
// residual stream is updated in place (residual += x, rounded to its dtype) and y is the norm of what was stored,
// so the next layer's residual and this layer's input agree bit for bit.
#include "core/device.h"
#include "core/tensor.h"
#include "layers/norm.h"

namespace attnzoo {

struct RmsNormCudaOptions {
  float eps = 1e-6f;
  bool mean_centered = false;  // Cohere's LayerNorm without bias: the row's mean is subtracted first
};

// Every refusal of the two launchers, before any CUDA call: x / y / residual of one shape (rows as in rows.h:
// [rows, dim], [tokens, heads, dim] with strides, or contiguous) and one float dtype (y may be 16-bit under an f32
// x), weight f32 [dim] contiguous, everything on one CUDA device, eps finite and >= 0. `residual` may be null.
// ArgumentError / DTypeError naming the argument.
void check_rms_norm_cuda(const TensorView& x, const TensorView* residual, const TensorView& weight,
                         const TensorView& y, const RmsNormCudaOptions& opts);

// The launchers (defined in norm.cu, CUDA builds only) check first, then run on the tensors' device.
// y = rms_norm(x) * weight; y may be x (in place).
void rms_norm_cuda(const TensorView& x, const TensorView& weight, const TensorView& y, const RmsNormCudaOptions& opts,
                   Stream stream = current_stream());
// residual += x; y = rms_norm(residual) * weight. y may be x.
void fused_add_rms_norm_cuda(const TensorView& x, const TensorView& residual, const TensorView& weight,
                             const TensorView& y, const RmsNormCudaOptions& opts, Stream stream = current_stream());

// An RmsNorm's folded weight uploaded to one GPU once, so a step does no host work (and can be captured in a
// CUDA graph).
class RmsNormCuda {
 public:
  RmsNormCuda() = default;
  RmsNormCuda(const RmsNorm& norm, Device device, Stream stream = current_stream());

  int64_t dim() const { return dim_; }
  TensorView weight() const;  // f32 [dim] on the device
  const RmsNormCudaOptions& options() const { return opts_; }
  void forward(const TensorView& x, const TensorView& y, Stream stream = current_stream()) const {
    rms_norm_cuda(x, weight(), y, opts_, stream);
  }
  void forward_add(const TensorView& x, const TensorView& residual, const TensorView& y,
                   Stream stream = current_stream()) const {
    fused_add_rms_norm_cuda(x, residual, weight(), y, opts_, stream);
  }

 private:
  DeviceBuffer weight_;
  int64_t dim_ = 0;
  RmsNormCudaOptions opts_;
};

}  // namespace attnzoo
