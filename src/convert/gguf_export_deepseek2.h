#pragma once
// DeepseekV3ForCausalLM and DeepseekV2ForCausalLM written as llama.cpp's deepseek2, the way convert_hf_to_gguf.py's
// DeepseekV2Model writes them (the inverse of loader/gguf_deepseek2.h): head_count_kv 1 and key_length /
// value_length the latent widths, with key_length_mla / value_length_mla the per-head ones; kv_b_proj split per
// head into attn_k_b (its qk_nope rows, transposed) and attn_v_b; the routed experts of the layers from
// first_k_dense_replace on stacked into ffn_{gate,up,down}_exps; the router's correction bias as exp_probs_b.bias;
// expert_gating_func sigmoid for V3 and softmax for V2; YaRN's mscale_all_dim as yarn_log_multiplier 0.1 *
// mscale_all_dim (llama.cpp's deepseek2 reads no mscale of its own: a YaRN mscale other than mscale_all_dim, and
// V3's rope_interleave false, which llama.cpp cannot express, are refused, naming the key).
#include <string>
#include <vector>

#include "convert/tensor_plan.h"
#include "loader/config.h"
#include "loader/gguf_writer.h"
#include "loader/model_dir.h"

namespace attnzoo {

// Every deepseek2.* hyperparameter (the ones add_hparams writes for the other architectures included).
void add_deepseek2_hparams(GgufWriter& w, const Config& c);

// kv_b_proj `name` ([heads * (qk_nope + v), kv_lora_rank]) split for llama.cpp's MLA cache, as the converter splits
// it (Kimi Linear's converter too): attn_k_b [heads, rank, qk_nope] (each head's qk_nope rows transposed) and
// attn_v_b [heads, v, rank] in block `blk` ("blk.N."). LoadError naming the tensor when the sizes disagree.
std::vector<TensorPlan> plan_kv_b_split(const ModelFiles& files, const std::string& name, const std::string& blk,
                                        int64_t heads, int64_t nope, int64_t v, int64_t rank);

// The file's tensors; `tied`: lm_head.weight is left out, and so are layers past num_hidden_layers (DeepSeek-V3's
// multi-token prediction), as the converter leaves them.
std::vector<TensorPlan> plan_deepseek2(const ModelFiles& files, const Config& c, bool tied);

}  // namespace attnzoo
