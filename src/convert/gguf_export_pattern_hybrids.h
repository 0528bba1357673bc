#pragma once
// NemotronHForCausalLM (nemotron_h), GraniteMoeHybridForCausalLM and BambaForCausalLM (granitehybrid) written the
// way convert_hf_to_gguf.py's NemotronHModel / GraniteHybridModel write them, the inverse of what
// loader/gguf_pattern_hybrids.h reads:
//   both      the layer pattern as per-layer head_count_kv (attention layers) and, for nemotron_h,
//             feed_forward_length (MLP layers); the Mamba-2 keys; A_log as A = -exp(A_log) [H, 1], D as [H, 1], the
//             gated norm as [groups, inner / groups], conv kernels squeezed, dt_bias as ssm_dt.bias; Q / K rows
//             permuted (LlamaModel's undo_permute, which these converters inherit); A, D, the conv kernel, the
//             gated norm and the router in F32
//   granite   input_linear ([gate; up]) split into ffn_gate / ffn_up, of the experts into ffn_gate_exps /
//             ffn_up_exps (output_linear as ffn_down_exps) and of the shared MLP into ffn_gate_shexp / ffn_up_shexp
//             beside experts, ffn_gate / ffn_up without; multipliers as embedding_scale / residual_scale /
//             logit_scale / attention.scale; rope.scaling.finetuned true when the model uses RoPE (Bamba, or
//             position_embedding_type "rope"), with Bamba's half-head rope.dimension_count
//   bamba     feed_forward as ffn_gate / ffn_up / ffn_down, pre_ff_layernorm as ffn_norm
//   nemotron_h_moe  the MoE layers' feed_forward_length (moe_intermediate_size), expert_* keys, experts stacked
//             into ffn_up_exps / ffn_down_exps, the router (F32) as ffn_gate_inp and its correction bias as
//             exp_probs_b.bias, the shared MLP as ffn_up_shexp / ffn_down_shexp. The converter picks this
//             architecture whenever config.json has num_experts_per_tok (transformers 5 writes it for every
//             Nemotron-H); here the pattern decides, and dense MLP layers beside MoE ones are refused
#include <optional>
#include <string>
#include <vector>

#include "convert/tensor_plan.h"
#include "loader/config.h"
#include "loader/gguf_writer.h"
#include "loader/model_dir.h"

namespace attnzoo {

// "nemotron_h" ("nemotron_h_moe" when its pattern has MoE layers) or "granitehybrid" for the classes above (`root`:
// the config.json); nullopt for other classes.
std::optional<std::string> pattern_hybrid_arch(const Config& root);

// Every <arch>.* hyperparameter (these files write none of the attention families' scalar forms).
void add_pattern_hybrid_hparams(GgufWriter& w, const Config& root, const std::string& gguf_arch);

// The file's tensors. LoadError naming a tensor with no GGUF counterpart or a shape the config contradicts.
std::vector<TensorPlan> plan_pattern_hybrid(const ModelFiles& files, const std::string& gguf_arch);

}  // namespace attnzoo
