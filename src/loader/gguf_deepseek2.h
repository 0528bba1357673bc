#pragma once
// llama.cpp's deepseek2 GGUF (convert_hf_to_gguf.py's DeepseekV2Model: DeepSeek-V2, V2.5, V3, R1, Kimi-K2) read
// back as the Hugging Face checkpoint it came from:
//   class      expert_gating_func 2 (sigmoid) is DeepseekV3ForCausalLM; 1 (softmax), or no key (the older V2
//              files), DeepseekV2ForCausalLM, whose topk_method is group_limited_greedy when expert_group_count > 1
//   MLA sizes  key_length_mla / value_length_mla are the per-head qk and v widths (the newer files, whose
//              key_length / value_length are the latent kv_lora_rank + rope and kv_lora_rank); without them,
//              key_length / value_length are; rope.dimension_count is qk_rope_head_dim; head_count_kv (1: the
//              converter's MQA view of the latent) is not read
//   YaRN       rope.scaling.yarn_log_multiplier is 0.1 * mscale_all_dim; llama.cpp's deepseek2 leaves cos / sin
//              unscaled, which is transformers' yarn with mscale equal to mscale_all_dim, so both are set to it
//   kv_b_proj  stored whole as attn_kv_b (older files) or split per head into attn_k_b ([heads, kv_lora_rank,
//              qk_nope], each head's k rows transposed) and attn_v_b ([heads, v_head_dim, kv_lora_rank]): joined
//              back into [heads * (qk_nope + v), kv_lora_rank], dequantized to F32 (a transposed block-quantized
//              row is no row of blocks); a file holding both reads attn_kv_b
//   groups     expert_group_count / expert_group_used_count are n_group / topk_group; a file without them (made
//              before llama.cpp read them) routes without a group limit, as llama.cpp then does
//   others     the rest are renamed one to one (the table in gguf_checkpoint.cc); the router's correction bias is
//              exp_probs_b.bias, shared experts ffn_*_shexp, routed experts stacked as ffn_*_exps
// RoPE rotates interleaved channel pairs (ggml's normal mode; transformers' rope_interleave true).
#include <string>
#include <vector>

#include "loader/gguf.h"
#include "loader/gguf_checkpoint.h"

namespace attnzoo {

// config.json text of a deepseek2 file. LoadError naming the file and key.
std::string deepseek2_config_json(const GgufFile& f);

// Layer `layer`'s attn_k_b / attn_v_b (`base`, without extension): false for other tensors. attn_k_b adds
// kv_b_proj (GgufFix::join_kv_b, both halves checked against each other) unless the layer also stores attn_kv_b;
// attn_v_b adds nothing (read with attn_k_b). LoadError naming the tensor when its partner is missing or the
// shapes disagree.
bool add_deepseek2_kv_b(const GgufFile& f, const GgufTensor& t, int64_t layer, const std::string& base,
                        std::vector<GgufHfTensor>& out);

// kv_b_proj's F32 bytes from the pieces add_deepseek2_kv_b recorded.
GgufHfBytes join_kv_b(const GgufHfTensor& t, const std::string& file);

}  // namespace attnzoo
