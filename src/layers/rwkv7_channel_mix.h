#pragma once
// RWKV-7 channel mix (fla's RWKV7FeedForward): a token-shifted squared-ReLU MLP,
//   xk = x + (x_prev - x) * x_k,   out = value(relu(key(xk))^2)
// where x_prev is the sequence's previous token (its ffn_shift state across pieces).
#include <string>
#include <vector>

#include "layers/batch.h"
#include "state/layer_memory.h"
#include "layers/linear.h"

namespace attnzoo {

struct Rwkv7ChannelMixWeights {
  TensorView x_k;  // [hidden]
  Linear key;      // [intermediate, hidden]
  Linear value;    // [hidden, intermediate]
};

class Rwkv7ChannelMix {
 public:
  Rwkv7ChannelMix() = default;
  // Validates shapes; errors name `name`.<tensor>.
  Rwkv7ChannelMix(int64_t hidden, Rwkv7ChannelMixWeights weights, const std::string& name);
  int64_t intermediate() const { return w_.key.out_features(); }
  uint64_t weight_bytes() const { return w_.key.weight_bytes() + w_.value.weight_bytes(); }
  const Rwkv7ChannelMixWeights& weights() const { return w_; }
  const std::vector<float>& x_k() const { return x_k_; }  // widened
  // x [T, hidden] (the ffn_norm output) -> out [T, hidden]; reads and updates each sequence's ffn_shift in its
  // slot of `memory` (the layer's, shared with the time mix).
  void forward(const float* x, const Batch& batch, const LayerMemory& memory, float* out) const;

 private:
  int64_t hidden_ = 0;
  Rwkv7ChannelMixWeights w_;
  std::vector<float> x_k_;
};

}  // namespace attnzoo
