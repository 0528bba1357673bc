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

class ShortConvMixer : public SequenceMixer {
 public:
  // in_proj [3 hidden, hidden], out_proj [hidden, hidden] (biases optional), conv_weight [hidden, 1, L] or
  // [hidden, L], conv_bias [hidden] or empty. Errors name `name`.<tensor>.
  ShortConvMixer(int64_t hidden, Linear in_proj, Linear out_proj, const TensorView& conv_weight,
                 const TensorView& conv_bias, const std::string& name);

  int64_t hidden() const { return hidden_; }
  int64_t kernel() const { return kernel_; }
  static int64_t state_len(int64_t kernel) { return kernel > 1 ? kernel - 1 : 1; }
  int64_t state_len() const { return state_len(kernel_); }
  // The conv tail of a layer of this width and conv length, without weights (config-only `inspect`).
  static CacheSpec spec(int64_t hidden, int64_t kernel);
  static constexpr const char* kKind = "short_conv";
  CacheSpec cache_spec() const override { return spec(hidden_, kernel_); }
  uint64_t weight_bytes() const override;
  std::string kind() const override { return kKind; }
  void forward(const float* x, const Batch& batch, const LayerMemory& memory, float* out) const override;
  // The parts as the forward pass reads them (the GPU runner's device_short_conv uploads these): conv weight
  // [hidden, L] and bias [hidden] or empty, as stored.
  const Linear& in_proj() const { return in_proj_; }
  const Linear& out_proj() const { return out_proj_; }
  const TensorView& conv_weight() const { return conv_weight_; }
  const TensorView& conv_bias() const { return conv_bias_; }

 private:
  int64_t hidden_, kernel_;
  Linear in_proj_, out_proj_;
  TensorView conv_weight_;  // [hidden, L]
  TensorView conv_bias_;
};

}  // namespace attnzoo
