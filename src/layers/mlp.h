#pragma once
// The gated feed-forward block of Llama-family models, down(act(gate(x)) * up(x)), and the ungated one of
// Nemotron-H, down(act(up(x))) (relu2).
#include "layers/activations.h"
#include "layers/block_parts.h"
#include "layers/linear.h"

namespace attnzoo {

class GatedMlp : public FeedForward {
 public:
  // Validates shapes: gate/up [intermediate, hidden], down [hidden, intermediate]; `name` prefixes errors.
  GatedMlp(Linear gate, Linear up, Linear down, Activation act, const std::string& name);
  int64_t hidden() const { return down_.out_features(); }
  int64_t intermediate() const { return gate_.out_features(); }
  // The parts, for a runner that holds its own copy of the weights elsewhere (models/cuda/).
  const Linear& gate_proj() const { return gate_; }
  const Linear& up_proj() const { return up_; }
  const Linear& down_proj() const { return down_; }
  Activation activation() const { return act_; }
  uint64_t weight_bytes() const override { return gate_.weight_bytes() + up_.weight_bytes() + down_.weight_bytes(); }
  // x [T, hidden] -> out [T, hidden].
  void forward(const float* x, int64_t T, float* out) const override;
  // forward(), with up to Linear::kMaxShared - 2 other projections of the same x (a MoE's router and shared gate)
  // run in the one shared call of gate / up: one quantization of x for all of them, the same bits.
  void forward(const float* x, int64_t T, float* out, std::span<const Linear::SharedOutput> beside) const;

 private:
  Linear gate_, up_, down_;
  Activation act_;
};

class PlainMlp : public FeedForward {
 public:
  // Validates shapes: up [intermediate, hidden], down [hidden, intermediate]; `name` prefixes errors.
  PlainMlp(Linear up, Linear down, Activation act, const std::string& name);
  int64_t hidden() const { return down_.out_features(); }
  int64_t intermediate() const { return up_.out_features(); }
  const Linear& up_proj() const { return up_; }
  const Linear& down_proj() const { return down_; }
  Activation activation() const { return act_; }
  uint64_t weight_bytes() const override { return up_.weight_bytes() + down_.weight_bytes(); }
  void forward(const float* x, int64_t T, float* out) const override;
  // forward(), with up to Linear::kMaxShared - 1 other projections of the same x run in the shared call of up.
  void forward(const float* x, int64_t T, float* out, std::span<const Linear::SharedOutput> beside) const;

 private:
  Linear up_, down_;
  Activation act_;
};

}  // namespace attnzoo
