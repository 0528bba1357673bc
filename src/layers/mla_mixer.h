#pragma once
// Multi-head latent attention (DeepSeek-V2/V3) as a SequenceMixer, with its latent cache.
//
//   q      = q_b(rms(q_a(x)))  (q LoRA)  or  q_proj(x)            [T, H, dn + dr], per head [q_nope ; q_pe]
//   latent = kv_a_proj_with_mqa(x) = [c_kv (r) ; k_pe (dr)];  c_kv = rms(c_kv)
//   RoPE on q_pe and k_pe (DeepSeek checkpoints pair channels 2i / 2i+1: the interleaved layout)
//   attention over every latent row the sequence has seen (kernels/softmax/mla.h), then o_proj.
// Per sequence the layer keeps only the latent rows [c_kv ; k_pe] (r + dr f32 per token, shared by all heads):
// prefill chunks expand them through kv_b_proj (mla_prefill, the naive form), decode steps absorb kv_b_proj into
// the queries and read the cache once (mla_decode).
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "core/aligned_buffer.h"
#include "kernels/softmax/mla.h"
#include "layers/block_parts.h"
#include "layers/linear.h"
#include "layers/norm.h"
#include "layers/rope.h"

namespace attnzoo {

// A contiguous per-sequence latent cache, f32 [capacity, r + dr], growing in whole blocks (doubling).
class LatentCache : public LayerState {
 public:
  static constexpr int64_t kDefaultBlockTokens = 256;

  LatentCache(int64_t latent_dim, int64_t block_tokens = kDefaultBlockTokens);
  static CacheSpec spec(int64_t latent_dim, int64_t block_tokens = kDefaultBlockTokens);

  int64_t length() const { return stored_; }
  int64_t capacity() const { return capacity_; }
  int64_t bytes() const override { return capacity_ * latent_dim_ * int64_t(sizeof(float)); }

  // Appends T rows of latent_dim values; row t starts at rows + t * src_stride.
  void append(const float* rows, int64_t T, int64_t src_stride);
  // Forgets everything after `length` tokens (rejected speculative tokens).
  void truncate(int64_t length);

  TensorView latent() const;            // [1, length, r + dr], for mla_prefill
  LatentCacheView decode_view() const;  // [1, capacity, r + dr] with cache_seqlens = length, for mla_decode

 private:
  int64_t latent_dim_, block_tokens_;
  int64_t stored_ = 0, capacity_ = 0;
  int32_t stored32_ = 0;
  AlignedBuffer<float> rows_;
};

struct MlaConfig {
  int64_t hidden = 0, num_heads = 0;
  int64_t q_lora_rank = 0;  // 0: a plain q_proj
  int64_t kv_lora_rank = 0, qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
  float norm_eps = 1e-6f;  // q_a_layernorm / kv_a_layernorm
  float scale = std::numeric_limits<float>::quiet_NaN();  // NaN: (dn + dr)^-0.5; YaRN models pass mscale^2 folded in
  int64_t cache_block_tokens = LatentCache::kDefaultBlockTokens;

  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  int64_t latent_dim() const { return kv_lora_rank + qk_rope_head_dim; }
};

struct MlaLayerWeights {
  std::optional<Linear> q_proj;                  // [H * (dn + dr), hidden] without q LoRA
  std::optional<Linear> q_a_proj, q_b_proj;      // [q_lora_rank, hidden], [H * (dn + dr), q_lora_rank]
  std::optional<RmsNorm> q_a_norm;               // [q_lora_rank]
  Linear kv_a_proj;                              // [r + dr, hidden]
  RmsNorm kv_a_norm;                             // [r]
  Linear kv_b_proj;                              // [H * (dn + dv), r], read by the kernels, never run as a Linear
  Linear o_proj;                                 // [hidden, H * dv]
};

class MlaMixer : public SequenceMixer {
 public:
  // Validates the weights' shapes against the config (ArgumentError naming `name`.q_a_proj.weight etc.) and the
  // rope's head_dim (must be qk_rope_head_dim).
  MlaMixer(const MlaConfig& config, MlaLayerWeights weights, Rope rope, const std::string& name);

  const MlaConfig& config() const { return config_; }
  static constexpr const char* kKind = "mla";
  static CacheSpec spec(const MlaConfig& c) { return LatentCache::spec(c.latent_dim(), c.cache_block_tokens); }
  CacheSpec cache_spec() const override { return spec(config_); }
  std::unique_ptr<LayerState> new_state() const override;
  uint64_t weight_bytes() const override;
  std::string kind() const override { return kKind; }
  // Appends the tokens' latent rows to every sequence's LatentCache at `layer_index`, then attends.
  void forward(const float* x, const Batch& batch, int64_t layer_index, float* out) const override;

 private:
  MlaWeights kernel_weights() const;
  MlaConfig config_;
  MlaLayerWeights w_;
  Rope rope_;
};

}  // namespace attnzoo
