#pragma once
// LayerNorm over the last dimension, optionally per group (GroupNorm over channel groups of one token, as
// RWKV-7 normalises each head's output): y = (x - mean) / sqrt(var + eps) * w + b, with mean and the biased
// variance taken over each group of `group_dim` values. Weight and bias may be f32/bf16/f16 (borrowed from the
// checkpoint); they are widened once at construction.
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace attnzoo {

class LayerNorm {
 public:
  LayerNorm() = default;
  // weight [dim], bias [dim] or an empty view (no bias); dim must split into `groups` equal groups. `name`
  // appears in errors.
  LayerNorm(const TensorView& weight, const TensorView& bias, float eps, const std::string& name,
            int64_t groups = 1);
  int64_t dim() const { return int64_t(w_.size()); }
  int64_t groups() const { return groups_; }
  float eps() const { return eps_; }
  const std::vector<float>& weight() const { return w_; }  // widened
  const std::vector<float>& bias() const { return b_; }    // widened; empty: none
  // rows of dim() contiguous values; in place when x == y.
  void forward(const float* x, int64_t rows, float* y) const;

 private:
  std::vector<float> w_, b_;
  int64_t groups_ = 1;
  float eps_ = 1e-5f;
};

// x, y [rows, groups * group_dim] contiguous; w [groups * group_dim]; b likewise or nullptr.
void layer_norm(const float* x, int64_t rows, int64_t groups, int64_t group_dim, const float* w, const float* b,
                float eps, float* y);
// Double accumulation, for tests.
void layer_norm_reference(const float* x, int64_t rows, int64_t groups, int64_t group_dim, const float* w,
                          const float* b, float eps, float* y);

}  // namespace attnzoo
