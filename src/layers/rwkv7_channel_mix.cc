#include "layers/rwkv7_channel_mix.h"

#include <algorithm>
#include <cmath>

#include "core/convert.h"
#include "core/error.h"
#include "layers/rwkv7_state.h"

namespace attnzoo {

Rwkv7ChannelMix::Rwkv7ChannelMix(int64_t hidden, Rwkv7ChannelMixWeights weights, const std::string& name)
    : hidden_(hidden), w_(std::move(weights)) {
  require(w_.x_k.numel() == hidden, (name + ".x_k").c_str(),
          "expected " + std::to_string(hidden) + " values, got " + w_.x_k.shape_str());
  require(w_.key.in_features() == hidden, (name + ".key.weight").c_str(),
          "expected [*, " + std::to_string(hidden) + "], got " + w_.key.shape_str());
  require(w_.value.out_features() == hidden && w_.value.in_features() == w_.key.out_features(),
          (name + ".value.weight").c_str(),
          "expected [" + std::to_string(hidden) + ", " + std::to_string(w_.key.out_features()) + "], got " +
              w_.value.shape_str());
  x_k_.resize(size_t(hidden));
  convert_to_f32(w_.x_k.data, w_.x_k.dtype, x_k_.data(), x_k_.size());
}

void Rwkv7ChannelMix::forward(const float* x, const Batch& batch, const LayerMemory& memory, float* out) const {
  const int64_t T = batch.num_tokens(), C = hidden_, I = intermediate();
  std::vector<float> mixed(size_t(T * C)), h(size_t(T * I));
  rwkv7_token_shift(x, batch, C, [&](int64_t s) {
    return Rwkv7State(memory, batch, s, hidden_).ffn_shift();
  }, mixed.data());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < C; ++i) mixed[size_t(t * C + i)] = x[t * C + i] + mixed[size_t(t * C + i)] * x_k_[size_t(i)];
  w_.key.forward(mixed.data(), T, h.data());
  for (float& v : h) {
    const float r = std::max(v, 0.f);
    v = r * r;
  }
  w_.value.forward(h.data(), T, out);
}

}  // namespace attnzoo
