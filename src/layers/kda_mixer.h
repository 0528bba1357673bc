#pragma once
// The Kimi Delta Attention mixer (Kimi Linear "linear_attention" layers), transformers' KimiLinearDeltaAttention:
//   q | k | v = silu(causal depthwise conv over time of [q_proj(x) | k_proj(x) | v_proj(x)])  (conv tail kept)
//   g = -exp(A_log[h]) * softplus(f_b(f_a(x)) + dt_bias)        per head AND key channel [T, H, K]
//   beta = sigmoid(b_proj(x))                                    per head [T, H]
//   o = KDA(l2norm(q), l2norm(k), v, g, beta)                    (state [H, K, V] f32 per sequence)
//   out = o_proj(rmsnorm(o) * w * sigmoid(g_b(g_a(x))))          (per head; norm first, then the sigmoid gate)
// Unlike Gated DeltaNet the decay is per key channel (kernels/linear/kda) and the output gate is a sigmoid.
// Key and value heads coincide (H heads of head_dim each for q, k and v).
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "layers/block_parts.h"
#include "layers/linear.h"

namespace attnzoo {

struct KdaConfig {
  int64_t hidden = 0, num_heads = 0, head_dim = 0, conv_kernel = 4;
  float norm_eps = 1e-6f;

  int64_t qkv_dim() const { return num_heads * head_dim; }
  int64_t conv_dim() const { return 3 * qkv_dim(); }
  int64_t conv_state_len() const { return conv_kernel > 1 ? conv_kernel - 1 : 1; }
};

struct KdaWeights {
  Linear q_proj, k_proj, v_proj;            // [H*K, hidden] each, no bias
  TensorView q_conv, k_conv, v_conv;        // [H*K, 1, W] (or [H*K, W]) depthwise conv weights, no bias
  Linear f_a_proj, f_b_proj;                // [K, hidden], [H*K, K]: the low-rank forget gate
  TensorView A_log;                         // H values (stored [1, 1, H, 1])
  TensorView dt_bias;                       // [H*K]
  Linear b_proj;                            // [H, hidden]
  Linear g_a_proj, g_b_proj;                // [K, hidden], [H*K, K]: the low-rank output gate
  TensorView o_norm_weight;                 // [K], shared by every head; applied as w
  Linear o_proj;                            // [hidden, H*K]
};

class KdaMixer : public SequenceMixer {
 public:
  // Validates every weight against the config; errors name `name`.<tensor>.
  KdaMixer(const KdaConfig& config, KdaWeights weights, const std::string& name);

  const KdaConfig& config() const { return config_; }
  // Pool slot: conv tail [3*H*K, W-1] and recurrent state [H, K, K].
  static CacheSpec spec(const KdaConfig& c);
  CacheSpec cache_spec() const override { return spec(config_); }
  uint64_t weight_bytes() const override;
  static constexpr const char* kKind = "linear_attention";
  std::string kind() const override { return kKind; }

  void forward(const float* x, const Batch& batch, const LayerMemory& memory, float* out) const override;
  // Frobenius norm of each head's state (after forward() has run on this batch).
  void trace(const float* x, const Batch& batch, const LayerMemory& memory, LayerTrace& out) const override;

  // The parts as the forward pass reads them (the GPU runner's device_kda uploads these): the projections as
  // stored; the stacked conv weight [3*H*K, W], -exp(A_log) [H], dt_bias [H*K] and the norm's weight [K] in f32.
  const KdaWeights& weights() const { return w_; }
  const std::vector<float>& conv_weight() const { return conv_weight_; }
  const std::vector<float>& neg_A() const { return neg_A_; }
  const std::vector<float>& dt_bias() const { return dt_bias_; }
  const std::vector<float>& norm_weight() const { return norm_w_; }

 private:
  KdaConfig config_;
  KdaWeights w_;
  std::vector<float> conv_weight_;  // [3*H*K, W] f32: the q, k and v conv weights stacked (small, widened once)
  std::vector<float> neg_A_, dt_bias_, norm_w_;
};

}  // namespace attnzoo
