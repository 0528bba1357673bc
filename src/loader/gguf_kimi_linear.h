#pragma once
// llama.cpp's kimi-linear GGUF (convert_hf_to_gguf.py's KimiLinearModel) seen as the KimiLinearForCausalLM
// checkpoint it came from (Moonshot's tensor names, the ones models/kimi_linear.cc reads), the converter's edits
// undone:
//   layers     head_count_kv per layer: 0 for a Kimi Delta Attention layer, 1 (the converter's MQA view of the
//              latent) for an MLA layer; the KDA layers run with attention.head_count heads of kda.head_dim
//   KDA        the q / k / v short-conv kernels stored as [1, channels, 1, kernel] (ne [kernel, 1, channels, 1];
//              3-D without the last 1 also read); A_log stored as A = -exp(A_log) (log_of_negated); dt_bias
//              stored as ssm_dt.bias; f / g LoRAs, beta and the gated norm renamed (ssm_f_a, ssm_beta, ssm_norm ...)
//   MLA        deepseek2's: kv_b_proj whole as attn_kv_b or split per head into attn_k_b / attn_v_b (joined back,
//              gguf_deepseek2.h); key_length_mla / value_length_mla the per-head widths, rope.dimension_count the
//              shared k_pe part (never rotated: Kimi's MLA has no positional encoding)
//   MoE        routed experts stacked as ffn_*_exps (exposed per expert as w1 / w3 / w2), the sigmoid router's
//              correction bias as exp_probs_b.bias, shared experts ffn_*_shexp, leading_dense_block_count the
//              dense layers before the first MoE one; llama.cpp always renormalizes the top-k weights
#include <optional>
#include <string>
#include <vector>

#include "loader/gguf.h"
#include "loader/gguf_checkpoint.h"

namespace attnzoo {

// config.json text of a kimi-linear file. LoadError naming the file and key.
std::string gguf_kimi_linear_config_json(const GgufFile& f);

// The file's tensors under Hugging Face names (unsorted); LoadError naming the file and tensor for one with no
// counterpart or a kernel / A of another shape.
std::vector<GgufHfTensor> gguf_kimi_linear_tensors(const GgufFile& f);

// The other direction, names only (for the writer): the GGUF name of Hugging Face tensor `hf_name`
// ("blk.N.ssm_a" for "model.layers.N.self_attn.A_log", "blk.N.ffn_gate.weight" for the dense MLP under mlp. or
// block_sparse_moe.); nullopt for stacked experts, kv_b_proj (split) and any tensor without a counterpart.
std::optional<std::string> gguf_kimi_linear_tensor_name(const std::string& hf_name);

}  // namespace attnzoo
