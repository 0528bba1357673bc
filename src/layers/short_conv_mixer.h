#pragma once
// LFM2's gated short convolution mixer:
//   [B | C | x] = in_proj(h);  y = C * conv(B * x);  out = out_proj(y)
// with conv a causal depthwise convolution over time of width L (no activation). Each sequence keeps the last
// L - 1 inputs of the conv (B * x) as its state, so prompt pieces and decode steps continue exactly.
#include <memory>
#include <string>

#include "core/aligned_buffer.h"
#include "core/tensor.h"
#include "layers/block_parts.h"
#include "layers/linear.h"

namespace attnzoo {

class ShortConvState : public LayerState {
 public:
  explicit ShortConvState(int64_t elems);
  int64_t bytes() const override { return elems_ * int64_t(sizeof(float)); }
  float* data() { return tail_.data(); }  // [hidden, L - 1], oldest first

 private:
  int64_t elems_;
  AlignedBuffer<float> tail_;
};

class ShortConvMixer : public SequenceMixer {
 public:
  // in_proj [3 hidden, hidden], out_proj [hidden, hidden] (biases optional), conv_weight [hidden, 1, L] or
  // [hidden, L], conv_bias [hidden] or empty. Errors name `name`.<tensor>.
  ShortConvMixer(int64_t hidden, Linear in_proj, Linear out_proj, const TensorView& conv_weight,
                 const TensorView& conv_bias, const std::string& name);

  int64_t hidden() const { return hidden_; }
  int64_t kernel() const { return kernel_; }
  int64_t state_len() const { return kernel_ > 1 ? kernel_ - 1 : 1; }
  CacheSpec cache_spec() const override;
  std::unique_ptr<LayerState> new_state() const override;
  uint64_t weight_bytes() const override;
  std::string kind() const override { return "short_conv"; }
  void forward(const float* x, const Batch& batch, int64_t layer_index, float* out) const override;

 private:
  int64_t hidden_, kernel_;
  Linear in_proj_, out_proj_;
  TensorView conv_weight_;  // [hidden, L]
  TensorView conv_bias_;
};

}  // namespace attnzoo
