#pragma once
// Multi-head latent attention read from a DeepSeek-layout checkpoint: the config keys and tensor names of
// transformers' DeepseekV3Attention. DeepSeek-V3 and Kimi Linear (whose MLA layers keep this layout) share it, so
// both builders and their describers read the same fields the same way; what differs between the two models
// (RoPE or none, YaRN's softmax scale, attention biases) stays in their files or is a parameter here.
#include <memory>
#include <string>

#include "layers/mla_mixer.h"
#include "layers/rope.h"
#include "loader/config.h"
#include "loader/model_dir.h"
#include "models/model.h"
#include "models/weight_bytes.h"

namespace attnzoo {

// The shape fields of a model whose attention heads read one shared latent: num_kv_heads = num_heads;
// intermediate_size is optional (0); max_position_embeddings falls back to `max_positions_fallback`.
ModelInfo read_mla_model_info(const Config& c, const LoadOptions& options, int64_t max_positions_fallback);

// q_lora_rank (absent: 0, a plain q_proj), kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, the
// load's cache block size and the plain softmax scale (dn + dr)^-0.5; sets info.head_dim to dn + dr. Sizes are
// not validated here: each builder checks them together with its own fields, in one message. The latent norms
// (q_a_layernorm, kv_a_layernorm) take 1e-6, the epsilon transformers' DeepSeek and Kimi classes build them with
// whatever rms_norm_eps says (llama.cpp takes the file's; every release has 1e-6).
MlaConfig read_mla_config(const Config& c, ModelInfo& info, const LoadOptions& options);

// DeepSeek's RoPE on the qk_rope_head_dim channels (rope_interleave, default true: channel pairs 2i / 2i+1).
// Under a scaled rope with mscale_all_dim, transformers multiplies the softmax scale by
// yarn_mscale(factor, mscale_all_dim)^2 on top of the rope's own attention factor: folded into mc.scale here.
RopeConfig read_mla_rope(const Config& c, MlaConfig& mc);

// One layer's tensors under `prefix` (q_a_proj, q_a_layernorm, q_b_proj with q LoRA, else q_proj;
// kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj; each Linear's bias when the checkpoint has one), held
// as `store`; bytes converted rather than borrowed are added to *owned.
std::unique_ptr<MlaMixer> load_mla_mixer(const ModelFiles& files, const MlaConfig& mc, const Rope& rope,
                                         const std::string& prefix, DType store, WeightBytes* owned);

// Parameters of those tensors as transformers writes them. `attention_bias`: q_a_proj, kv_a_proj_with_mqa and
// o_proj carry a bias (DeepSeek's attention_bias; q_proj / q_b_proj never do).
int64_t mla_parameter_count(const MlaConfig& mc, bool attention_bias);

}  // namespace attnzoo
