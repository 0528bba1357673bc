#pragma once
// KimiLinearForCausalLM written as llama.cpp's kimi-linear, the way convert_hf_to_gguf.py's KimiLinearModel writes
// it (the inverse of loader/gguf_kimi_linear.h):
//   keys     attention.head_count_kv per layer (0 for a KDA layer, 1 for an MLA one: the converter's MQA view of
//            the latent); ssm.conv_kernel, kda.head_dim; deepseek2's MLA keys (q_lora_rank when there is one,
//            key_length the latent + k_pe width, key_length_mla / value_length_mla the per-head ones,
//            rope.dimension_count); the MoE's counts, leading_dense_block_count, expert_weights_scale and sigmoid
//            gating (2); expert_group_count / _used_count when the experts are grouped
//   tensors  the short-conv kernels [channels, 1, kernel] as [1, channels, 1, kernel] and A_log as -exp(A_log),
//            both F32 (llama-quantize keeps ssm_conv1d*; A is no .weight); dt_bias as ssm_dt.bias; kv_b_proj split
//            per head into attn_k_b / attn_v_b (gguf_export_deepseek2.h's split); each MoE layer's w1 / w3 / w2
//            experts stacked into ffn_{gate,up,down}_exps; the router in F32
//   refused  (naming the key) what llama.cpp's kimi-linear cannot hold: a KDA head count other than
//            num_attention_heads, a dense layer after an MoE one, top-k weights not renormalized
#include <vector>

#include "convert/tensor_plan.h"
#include "loader/config.h"
#include "loader/gguf_writer.h"
#include "loader/model_dir.h"

namespace attnzoo {

// Every kimi-linear.* hyperparameter. LoadError naming the key at fault.
void add_kimi_linear_hparams(GgufWriter& w, const Config& c);

// The file's tensors. LoadError naming a tensor with no GGUF counterpart, a kernel of another shape or an expert
// missing.
std::vector<TensorPlan> plan_kimi_linear(const ModelFiles& files, const Config& c);

}  // namespace attnzoo
