#include "layers/norm.h"

#include <cmath>

#include "core/convert.h"
#include "core/error.h"

namespace attnzoo {

RmsNorm::RmsNorm(const TensorView& weight, float eps, bool add_one, const std::string& name) : eps_(eps) {
  require(weight.ndim == 1 && weight.is_contiguous(), name.c_str(), "norm weight must be 1-D, got " + weight.shape_str());
  w_.resize(size_t(weight.shape[0]));
  convert_to_f32(weight.data, weight.dtype, w_.data(), w_.size());
  if (add_one)
    for (float& v : w_) v += 1.f;
}

RmsNorm RmsNorm::mean_centered(const TensorView& weight, float eps, const std::string& name) {
  RmsNorm n(weight, eps, false, name);
  n.center_ = true;
  return n;
}

void RmsNorm::forward(const float* x, int64_t rows, int64_t x_stride, float* y, int64_t y_stride) const {
  if (!center_) return rms_norm(x, rows, dim(), x_stride, w_.data(), eps_, y, y_stride);
  // LayerNorm without bias is the RMS norm of the mean-centred row: centre it, then the vectorised RMS norm.
  const int64_t n = dim();
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * x_stride;
    float* yr = y + r * y_stride;
    double sum = 0;
    for (int64_t k = 0; k < n; ++k) sum += xr[k];
    const float mean = float(sum / double(n));
    for (int64_t k = 0; k < n; ++k) yr[k] = xr[k] - mean;
    rms_norm(yr, 1, n, n, w_.data(), eps_, yr, n);
  }
}

void rms_norm_reference(const float* x, int64_t rows, int64_t dim, int64_t x_stride, const float* w, float eps,
                        float* y, int64_t y_stride) {
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t k = 0; k < dim; ++k) ss += double(x[r * x_stride + k]) * x[r * x_stride + k];
    const double inv = 1.0 / std::sqrt(ss / double(dim) + eps);
    for (int64_t k = 0; k < dim; ++k) y[r * y_stride + k] = float(double(w[k]) * x[r * x_stride + k] * inv);
  }
}

}  // namespace attnzoo
