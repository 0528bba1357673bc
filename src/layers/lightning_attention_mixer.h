#pragma once
// MiniMax-Text-01 / M1's lightning attention ("linear_attention" layers of MiniMaxForCausalLM): linear attention
// with a fixed decay per head, no softmax and no query scale.
//   [q_h | k_h | v_h] = silu(qkv_proj(x)) per head h           (qkv_proj [3 H D, hidden], head-major)
//   S_t = exp(-slope_h) S_{t-1} + k_t^T v_t,   o_t = q_t S_t   (state [H, D, D] f32 per sequence)
//   out = out_proj(sigmoid(output_gate(x)) * rmsnorm(o))       (rmsnorm over all H D features, with weight)
// The recurrence is simple GLA with the constant log decay g_gamma = -slope_h and scale 1, so it runs on
// kernels/linear/simple_gla (chunked for prompt pieces, recurrent for decode tokens).
// slope_h = (2^(-8/H))^(h + 1) * (1 - layer / (layers - 1 + 1e-5) + 1e-5): ALiBi's slopes, shrinking with depth
// (the last layer nearly decay-free).
#include <string>
#include <vector>

#include "core/tensor.h"
#include "layers/block_parts.h"
#include "layers/linear.h"

namespace attnzoo {

struct LightningAttentionConfig {
  int64_t hidden = 0, heads = 0, head_dim = 0;
  std::vector<float> slopes;  // [heads], the decay rates (positive)
  float norm_eps = 1e-6f;

  int64_t inner() const { return heads * head_dim; }
};

// MiniMax's per-head decay rates of layer `layer` of `layers` (transformers' get_slope_rate, in double).
std::vector<float> minimax_slopes(int64_t heads, int64_t layer, int64_t layers);

struct LightningAttentionWeights {
  Linear qkv_proj;     // [3 H D, hidden]
  Linear output_gate;  // [H D, hidden]
  Linear out_proj;     // [hidden, H D]
  TensorView norm;     // [H D]
};

class LightningAttentionMixer : public SequenceMixer {
 public:
  // Validates every weight against the config; errors name `name`.<tensor>.
  LightningAttentionMixer(const LightningAttentionConfig& config, LightningAttentionWeights weights,
                          const std::string& name);

  const LightningAttentionConfig& config() const { return config_; }
  const LightningAttentionWeights& weights() const { return w_; }
  const std::vector<float>& norm_weight() const { return norm_; }  // widened to f32
  const std::vector<float>& log_decay() const { return log_decay_; }  // -slope per head: simple GLA's g_gamma
  // Pool slot: the [H, D, D] state.
  static CacheSpec spec(const LightningAttentionConfig& c);
  CacheSpec cache_spec() const override { return spec(config_); }
  uint64_t weight_bytes() const override;
  static constexpr const char* kKind = "lightning_attention";
  std::string kind() const override { return kKind; }

  void forward(const float* x, const Batch& batch, const LayerMemory& memory, float* out) const override;
  // Frobenius norm of each head's state (after forward() has run on this batch).
  void trace(const float* x, const Batch& batch, const LayerMemory& memory, LayerTrace& out) const override;

 private:
  LightningAttentionConfig config_;
  LightningAttentionWeights w_;
  std::vector<float> log_decay_, norm_;  // -slope per head; the norm weight widened
};

}  // namespace attnzoo
