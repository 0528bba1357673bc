#pragma once
// RMSNorm over the last dimension: y = x / sqrt(mean(x^2) + eps) * w, or * (1 + w) for the Gemma form.
// The weight may be f32/bf16/f16 (borrowed from the checkpoint); it is widened once at construction.
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace attnzoo {

class RmsNorm {
 public:
  RmsNorm() = default;
  // weight [dim]; `name` appears in errors.
  RmsNorm(const TensorView& weight, float eps, bool add_one, const std::string& name);
  // Cohere's LayerNorm without bias: y = (x - mean(x)) / sqrt(var(x) + eps) * w, the RMS norm of the centered row.
  static RmsNorm mean_centered(const TensorView& weight, float eps, const std::string& name);
  int64_t dim() const { return int64_t(w_.size()); }
  // rows of `dim` values: x[r * x_stride ...] -> y[r * y_stride ...]; in place when x == y.
  void forward(const float* x, int64_t rows, int64_t x_stride, float* y, int64_t y_stride) const;
  const std::vector<float>& weight() const { return w_; }  // (1 + w) already folded in for the Gemma form
  float eps() const { return eps_; }
  bool mean_centered() const { return center_; }

 private:
  std::vector<float> w_;
  float eps_ = 1e-6f;
  bool center_ = false;
};

void rms_norm(const float* x, int64_t rows, int64_t dim, int64_t x_stride, const float* w, float eps, float* y,
              int64_t y_stride);
// Double accumulation; w already includes any (1 + w) fold.
void rms_norm_reference(const float* x, int64_t rows, int64_t dim, int64_t x_stride, const float* w, float eps,
                        float* y, int64_t y_stride);

}  // namespace attnzoo
