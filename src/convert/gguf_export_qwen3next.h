#pragma once
// Qwen3NextForCausalLM written the way llama.cpp's convert_hf_to_gguf.py (Qwen3NextModel on Qwen2MoeModel) writes
// it, the inverse of what loader/gguf_hybrids.h undoes: zero-centered RMSNorm weights stored as 1 + w (all but the
// linear attention's gated norm), A_log as A = -exp(A_log), the conv1d kernel squeezed to [channels, kernel],
// dt_bias as ssm_dt.bias, in_proj_qkvz ([q, k, v, z] per key head) split into attn_qkv ([all q; all k; all v]) and
// attn_gate ([all z]), each layer's experts stacked into ffn_{gate,up,down}_exps, and the conv kernel, A and the
// routers kept in F32. Only the MoE form is written: llama.cpp refuses a qwen3next file without experts (and
// attnzoo's reader asks for qwen3next.expert_count too); layers in mlp_only_layers keep dense MLPs (ffn_gate /
// ffn_up / ffn_down), as the converter writes them.
#include <vector>

#include "convert/tensor_plan.h"
#include "loader/config.h"
#include "loader/gguf_writer.h"
#include "loader/model_dir.h"

namespace attnzoo {

// qwen3next.* hyperparameters beyond the attention ones every architecture writes. LoadError naming the config
// key that GGUF cannot express (num_experts 0, layer_types not one full-attention layer every
// full_attention_interval, norm_topk_prob false).
void add_qwen3next_hparams(GgufWriter& w, const Config& c, int64_t rotary_dim);

// The file's tensors. LoadError naming the tensor whose shape contradicts the config, or an expert missing.
std::vector<TensorPlan> plan_qwen3next(const ModelFiles& files);

}  // namespace attnzoo
