#pragma once
// The state-space and recurrent families of llama.cpp's GGUF seen as the Hugging Face checkpoints they were
// converted from (convert_hf_to_gguf.py's MambaModel, Mamba2Model, LFM2Model, LFM2MoeModel, JambaModel,
// FalconH1Model, Qwen3NextModel), each converter edit undone:
//   mamba, mamba2, falcon-h1, qwen3next   A_log is stored as A = -exp(A_log) (log_of_negated); conv1d kernels
//              [C, 1, K] squeezed to [C, K]; Mamba-2's A and D stored as [H, 1] and its gated norm as
//              [groups, inner / groups] (reshaped back); Mamba-2's dt_bias stored as ssm_dt.bias
//   falcon-h1  the muP multipliers are folded into the weights and not stored: the config says 1 for each, which
//              computes the same function; llama.cpp's gated norm gates before normalizing
//              (mamba_norm_before_gate false)
//   lfm2       short-conv kernels squeezed; head_count_kv per layer, 0 for a conv layer, gives layer_types
//   lfm2moe    lfm2's edits; each MoE layer's experts stacked (ffn_*_exps, exposed per expert as w1 / w3 / w2),
//              expert_bias as exp_probs_b.bias, num_dense_layers as leading_dense_block_count
//   jamba      the Mamba-1 edits (A, squeezed conv1d); head_count_kv per layer, 0 for a Mamba layer, and the
//              layers holding a router (ffn_gate_inp) give attn_layer_period / offset and expert_layer_period /
//              offset (a pattern without a period is refused: JambaConfig cannot state it)
//   qwen3next  RMSNorm weights stored as 1 + w (all but the linear-attention gated norm); in_proj_qkvz, interleaved
//              per key head in Hugging Face ([q, k, v, z] per head), stored as attn_qkv ([q..., k..., v...])
//              and attn_gate ([z...]): the two stay apart as in_proj_qkv and in_proj_z (any two types)
//   qwen35, qwen35moe  Qwen3.5 (dense) and Qwen3.5-MoE: qwen3next's norms; in_proj_qkv / z / b / a stored as
//              attn_qkv / attn_gate / ssm_beta / ssm_alpha; the linear-attention value heads tiled over the key
//              heads in every tensor indexed by them (gguf_qwen35.h), moved back; the appended
//              multi-token-prediction blocks left out
//   rwkv7      flash-linear-attention's RWKV7ForCausalLM (gguf_rwkv7.h)
//   nemotron_h, granitehybrid  Nemotron-H, Granite 4.0-H and Bamba: the Mamba-2 edits above, Q / K rows
//              unpermuted, the layer pattern from the per-layer head / feed-forward counts (gguf_pattern_hybrids.h)
//   kimi-linear  Kimi Linear's KDA + MLA layers (gguf_kimi_linear.h)
#include <optional>
#include <string>
#include <vector>

#include "loader/gguf.h"
#include "loader/gguf_checkpoint.h"

namespace attnzoo {

// Whether the file's general.architecture is one of the families above (false when the key is absent: the
// caller's own lookup names it).
bool gguf_is_hybrid(const GgufFile& f);

// The general.architecture values of the families above, for error messages that list what loads.
std::vector<std::string> gguf_hybrid_architectures();

// config.json text for a hybrid family's file. Throws LoadError naming the file and the key.
std::string gguf_hybrid_config_json(const GgufFile& f);

// The file's tensors under Hugging Face names (unsorted); a tensor with no counterpart is refused (LoadError
// naming the file and tensor).
std::vector<GgufHfTensor> gguf_hybrid_tensors(const GgufFile& f);

// The other direction, names only (for the writer): the GGUF name of Hugging Face tensor `hf_name` in a
// `gguf_arch` file ("blk.N.ssm_a" for "model.layers.N.linear_attn.A_log"); nullopt for an unknown architecture
// or a tensor with no one-to-one counterpart (rwkv7 and kimi-linear: their own files' tables; stacked experts,
// Qwen3-Next's split in_proj_qkvz). The value edits listed above are the writer's to apply.
std::optional<std::string> gguf_hybrid_tensor_name(const std::string& gguf_arch, const std::string& hf_name);

}  // namespace attnzoo
