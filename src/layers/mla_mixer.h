#pragma once
// Multi-head latent attention (DeepSeek-V2/V3) as a SequenceMixer, with its latent cache.
//
//   q      = q_b(rms(q_a(x)))  (q LoRA)  or  q_proj(x)            [T, H, dn + dr], per head [q_nope ; q_pe]
//   latent = kv_a_proj_with_mqa(x) = [c_kv (r) ; k_pe (dr)];  c_kv = rms(c_kv)
//   RoPE on q_pe and k_pe (DeepSeek checkpoints pair channels 2i / 2i+1: the interleaved layout)
//   attention over every latent row the sequence has seen (kernels/softmax/mla.h), then o_proj.
// Per sequence the layer keeps only the latent rows [c_kv ; k_pe] (r + dr per token, shared by all heads) in the
// pool's paged latent cache:
// prefill chunks expand them through kv_b_proj (mla_prefill, the naive form), decode steps absorb kv_b_proj into
// the queries and read the cache once (mla_decode).
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "kernels/softmax/mla.h"
#include "layers/block_parts.h"
#include "layers/linear.h"
#include "layers/norm.h"
#include "layers/rope.h"

namespace attnzoo {

struct MlaConfig {
  int64_t hidden = 0, num_heads = 0;
  int64_t q_lora_rank = 0;  // 0: a plain q_proj
  int64_t kv_lora_rank = 0, qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
  float norm_eps = 1e-6f;  // q_a_layernorm / kv_a_layernorm
  float scale = std::numeric_limits<float>::quiet_NaN();  // NaN: (dn + dr)^-0.5; YaRN models pass mscale^2 folded in
  bool rope = true;  // false: q_pe / k_pe stay unrotated (Kimi Linear's NoPE MLA layers)

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
  const MlaLayerWeights& weights() const { return w_; }  // kv_b_proj already dense
  const Rope& rope() const { return rope_; }
  static constexpr const char* kKind = "mla";
  static CacheSpec spec(const MlaConfig& c) { return CacheSpec::latent(c.latent_dim()); }
  CacheSpec cache_spec() const override { return spec(config_); }
  uint64_t weight_bytes() const override;
  std::string kind() const override { return kKind; }
  // Writes the tokens' latent rows into the pool's paged latent cache (`memory.k`), then attends.
  void forward(const float* x, const Batch& batch, const LayerMemory& memory, float* out) const override;

 private:
  MlaWeights kernel_weights() const;
  MlaConfig config_;
  MlaLayerWeights w_;
  Rope rope_;
};

}  // namespace attnzoo
