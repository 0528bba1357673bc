#pragma once
// A gated MLP with muP multipliers (Falcon-H1's mlp_multipliers):
//   down(act(gate(x) * gate_multiplier) * up(x)) * down_multiplier
// The gate multiplier sits inside the activation, so it cannot be a scale around a plain GatedMlp; the GatedMlp it
// holds gives the weights and shapes (the GPU runner's device_mlp reads them with the two multipliers).
#include "layers/mlp.h"

namespace attnzoo {

class ScaledGatedMlp : public FeedForward {
 public:
  ScaledGatedMlp(GatedMlp mlp, float gate_multiplier, float down_multiplier);
  const GatedMlp& mlp() const { return mlp_; }
  float gate_multiplier() const { return gate_mult_; }
  float down_multiplier() const { return down_mult_; }
  uint64_t weight_bytes() const override { return mlp_.weight_bytes(); }
  void forward(const float* x, int64_t T, float* out) const override;

 private:
  GatedMlp mlp_;
  float gate_mult_, down_mult_;
};

}  // namespace attnzoo
