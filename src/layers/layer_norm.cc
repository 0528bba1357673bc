#include "layers/layer_norm.h"

#include <cmath>

#include "core/convert.h"
#include "core/error.h"

namespace attnzoo {
namespace {

// 8 partial sums let the compiler vectorise the reductions (float addition is not reassociated otherwise).
float sum8(const float* x, int64_t n, float shift, bool square) {
  float part[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) {
      const float d = x[i + j] - shift;
      part[j] += square ? d * d : d;
    }
  float s = 0.f;
  for (; i < n; ++i) {
    const float d = x[i] - shift;
    s += square ? d * d : d;
  }
  for (float p : part) s += p;
  return s;
}

}  // namespace

LayerNorm::LayerNorm(const TensorView& weight, const TensorView& bias, float eps, const std::string& name,
                     int64_t groups)
    : groups_(groups), eps_(eps) {
  require(weight.ndim == 1 && weight.is_contiguous(), (name + ".weight").c_str(),
          "norm weight must be 1-D, got " + weight.shape_str());
  const int64_t dim = weight.shape[0];
  require(groups >= 1 && dim % groups == 0, (name + ".weight").c_str(),
          std::to_string(dim) + " values do not split into " + std::to_string(groups) + " groups");
  w_.resize(size_t(dim));
  convert_to_f32(weight.data, weight.dtype, w_.data(), w_.size());
  if (!bias.empty()) {
    require(bias.ndim == 1 && bias.shape[0] == dim && bias.is_contiguous(), (name + ".bias").c_str(),
            "expected [" + std::to_string(dim) + "], got " + bias.shape_str());
    b_.resize(size_t(dim));
    convert_to_f32(bias.data, bias.dtype, b_.data(), b_.size());
  }
}

void LayerNorm::forward(const float* x, int64_t rows, float* y) const {
  layer_norm(x, rows, groups_, dim() / groups_, w_.data(), b_.empty() ? nullptr : b_.data(), eps_, y);
}

void layer_norm(const float* x, int64_t rows, int64_t groups, int64_t group_dim, const float* w, const float* b,
                float eps, float* y) {
  const int64_t n = rows * groups;
  for (int64_t g = 0; g < n; ++g) {
    const float* xg = x + g * group_dim;
    float* yg = y + g * group_dim;
    const int64_t c = (g % groups) * group_dim;
    // Two passes (mean, then the centred sum of squares): no cancellation when |mean| >> std.
    const float mean = sum8(xg, group_dim, 0.f, false) / float(group_dim);
    const float var = sum8(xg, group_dim, mean, true) / float(group_dim);
    const float inv = 1.f / std::sqrt(var + eps);
    if (b) {
      for (int64_t i = 0; i < group_dim; ++i) yg[i] = (xg[i] - mean) * inv * w[c + i] + b[c + i];
    } else {
      for (int64_t i = 0; i < group_dim; ++i) yg[i] = (xg[i] - mean) * inv * w[c + i];
    }
  }
}

void layer_norm_reference(const float* x, int64_t rows, int64_t groups, int64_t group_dim, const float* w,
                          const float* b, float eps, float* y) {
  for (int64_t g = 0; g < rows * groups; ++g) {
    const float* xg = x + g * group_dim;
    const int64_t c = (g % groups) * group_dim;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < group_dim; ++i) mean += xg[i];
    mean /= double(group_dim);
    for (int64_t i = 0; i < group_dim; ++i) var += (xg[i] - mean) * (xg[i] - mean);
    var /= double(group_dim);
    const double inv = 1.0 / std::sqrt(var + double(eps));
    for (int64_t i = 0; i < group_dim; ++i)
      y[g * group_dim + i] = float((xg[i] - mean) * inv * w[c + i] + (b ? double(b[c + i]) : 0.0));
  }
}

}  // namespace attnzoo
