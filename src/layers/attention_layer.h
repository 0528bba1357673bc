#pragma once
// Softmax self-attention over the pool's paged KV cache: q/k/v projections (optional bias), optional q/k RMSNorm
// (per head: Qwen3; across all heads: OLMo 2), RoPE at each token's position, K/V written to the pool slots the
// batch's slot mapping names, then per sequence the prefill kernel (chunks longer than kMaxDecodeQueries) or the paged decode kernel,
// optionally over a sliding window; finally the output projection. Options for other families: attention-logit softcapping (Gemma 2),
// per-head learned sink logits (gpt-oss) and a sigmoid output gate (Qwen3-Next "gated attention").
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "layers/batch.h"
#include "layers/block_parts.h"
#include "layers/linear.h"
#include "layers/norm.h"
#include "layers/rope.h"

namespace attnzoo {

struct AttentionConfig {
  int64_t hidden = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0;
  int64_t window = 0;  // >0: sliding window of this many keys (query included)
  float scale = std::numeric_limits<float>::quiet_NaN();  // NaN: head_dim^-0.5
  float softcap = 0.f;  // >0: scores = softcap * tanh(scores / softcap) before masking (Gemma 2 attn_logit_softcapping)
  // Qwen3-Next: q_proj yields num_heads * 2 * head_dim features, per head [q (head_dim) ; gate (head_dim)];
  // the attention output is multiplied by sigmoid(gate) before o_proj.
  bool output_gate = false;
  // Llama 4-style attention temperature (Ministral 3 / Mistral Small 3.x's text model: llama_4_scaling_beta): after
  // RoPE, the query at position p is multiplied by 1 + temperature_beta * log(1 + floor(p / temperature_interval)),
  // sharpening attention far past the pretraining context (temperature_interval: original_max_position_embeddings).
  // 0: off.
  float temperature_beta = 0.f;
  int64_t temperature_interval = 0;
};

class AttentionLayer : public SequenceMixer {
 public:
  // Validates projection shapes against the config (ArgumentError naming `name`.q_proj etc.).
  AttentionLayer(const AttentionConfig& config, Linear q, Linear k, Linear v, Linear o, std::optional<RmsNorm> q_norm,
                 std::optional<RmsNorm> k_norm, Rope rope, const std::string& name);

  const AttentionConfig& config() const { return config_; }
  // The parts, for a runner that holds its own copy of the weights elsewhere (models/cuda/).
  const Linear& q_proj() const { return q_; }
  const Linear& k_proj() const { return k_; }
  const Linear& v_proj() const { return v_; }
  const Linear& o_proj() const { return o_; }
  const std::optional<RmsNorm>& q_norm() const { return q_norm_; }
  const std::optional<RmsNorm>& k_norm() const { return k_norm_; }
  const Rope& rope() const { return rope_; }
  // gpt-oss attention sinks: sinks [num_heads] (f32/bf16/f16, widened here) is one learned logit per head that
  // joins every query's softmax denominator. `name` appears in errors.
  void set_sinks(const TensorView& sinks, const std::string& name);
  const std::vector<float>& sinks() const { return sinks_; }
  // The cache and kind of a layer with this config, without weights (config-only `inspect` calls these too).
  static CacheSpec spec(const AttentionConfig& c) { return CacheSpec::kv(c.num_kv_heads, c.head_dim, c.window); }
  static std::string kind_of(const AttentionConfig& c) { return c.window > 0 ? "sliding_attention" : "attention"; }
  CacheSpec cache_spec() const override { return spec(config_); }
  uint64_t weight_bytes() const override;
  std::string kind() const override { return kind_of(config_); }
  int64_t window() const override { return config_.window; }

  // x [T, hidden] for the batch's packed tokens -> out [T, hidden]; writes the tokens' K/V into `memory`.
  void forward(const float* x, const Batch& batch, const LayerMemory& memory, float* out) const override;
  // q and k after norm and RoPE for the batch's tokens (stateless), plus scale and window.
  void trace(const float* x, const Batch& batch, const LayerMemory& memory, LayerTrace& out) const override;

 private:
  // x [T, hidden] -> q [T, num_heads * D], k [T, num_kv_heads * D] after the q/k norms and RoPE.
  void project_qk(const float* x, const Batch& batch, float* q, float* k) const;
  // The q / k norms in place on T tokens' q [T, num_heads * D] and k [T, num_kv_heads * D].
  void norm_qk(float* q, float* k, int64_t T) const;
  // The attention temperature on T tokens' q (after RoPE), when the config has one.
  void scale_queries(float* q, int64_t T, const int32_t* positions) const;
  AttentionConfig config_;
  Linear q_, k_, v_, o_;
  std::optional<RmsNorm> q_norm_, k_norm_;
  Rope rope_;
  std::vector<float> sinks_;  // empty: no sinks
};

}  // namespace attnzoo
