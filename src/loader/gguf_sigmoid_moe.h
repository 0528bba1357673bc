#pragma once
// GLM-4.5 / GLM-4.6 (glm4moe) and MiniMax-M2 (minimax-m2) GGUF files, the sigmoid-routed MoE families with a
// routing bias (llama.cpp's convert_hf_to_gguf.py Glm4MoeModel / MiniMaxM2Model), read back as their config.json:
//   both       experts stacked as ffn_{gate,up,down}_exps, the router ffn_gate_inp, its correction bias
//              exp_probs_b.bias (e_score_correction_bias); the RoPE width is stated as for every file (add_rotary_share)
//   glm4moe    expert_shared_count, leading_dense_block_count (first_k_dense_replace), expert_weights_scale /
//              _norm, shared experts ffn_*_shexp, post_attention_norm as Llama's pre-feedforward norm; biased q / k / v
//              and q / k norms by tensor presence. nextn_predict_layers multi-token-prediction blocks close the file
//              (block_count counts them, nextn.* tensors beside a whole decoder layer): they come back under the
//              release's names, model.layers.<num_hidden_layers..>, which the builder never reads
//   minimax-m2 every block a MoE of expert_feed_forward_length-wide experts, always renormalized; q / k norms
//              across all heads
// Names are in gguf_checkpoint.cc's per-architecture table.
#include <string>

#include "loader/gguf.h"
#include "loader/gguf_hf_util.h"

namespace attnzoo {

// The multi-token-prediction blocks at the end of a glm4moe file (nextn_predict_layers, checked to leave at
// least one decoder block); 0 for other architectures.
int64_t gguf_mtp_blocks(const GgufFile& f, const std::string& arch);

// Adds the MoE, RoPE-width and bias / norm switches of a glm4moe or minimax-m2 file to `c`; nothing for other
// architectures. LoadError naming the key for a gating function other than sigmoid.
void add_sigmoid_moe_config(gguf_hf::JsonObject& c, const GgufFile& f, const std::string& arch);

}  // namespace attnzoo
