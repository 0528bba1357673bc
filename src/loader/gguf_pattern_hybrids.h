#pragma once
// llama.cpp's nemotron_h and granitehybrid files (convert_hf_to_gguf.py's NemotronHModel and GraniteHybridModel,
// the latter also Bamba's converter) as the Hugging Face configs models/hybrid_stack.h builds from:
//   the layer pattern  from the per-layer arrays: head_count_kv > 0 is an attention layer, feed_forward_length > 0
//                      (nemotron_h) an MLP layer, both 0 a Mamba-2 layer (llama.cpp's rule)
//   nemotron_h         NemotronHForCausalLM with hybrid_override_pattern; tensors under backbone.*
//   nemotron_h_moe     the same with "E" (MoE) for the feed-forward layers: stacked ffn_up_exps / ffn_down_exps,
//                      exp_probs_b.bias as the router's e_score_correction_bias, *_shexp as the shared MLP
//   granitehybrid      GraniteMoeHybridForCausalLM (a Bamba file reads as one: its dense MLP as the shared MLP with
//                      no experts, RoPE by rope.scaling.finetuned, its head_dim^-0.5 as attention_multiplier);
//                      embedding_scale / residual_scale / logit_scale / attention.scale as Granite's multipliers;
//                      input_linear, split by the converter into gate and up halves, read as gate_proj / up_proj
// Both converters permute attention Q / K rows for ggml's RoPE (LlamaModel's undo_permute), even without RoPE:
// the loader unpermutes them (attn_q_kv_heads gives the head counts).
#include <cstdint>

#include "loader/gguf_hf_util.h"

namespace attnzoo {

// moe: a nemotron_h_moe file, whose feed-forward layers are MoE layers (expert_* keys: DeepSeek-V3's routing).
void nemotron_h_config(gguf_hf::JsonObject& c, const gguf_hf::Meta& m, bool moe);
void granite_hybrid_config(gguf_hf::JsonObject& c, const gguf_hf::Meta& m);

// (query heads, kv heads) of the file's attention layers, for unpermuting attn_q / attn_k.
std::pair<int64_t, int64_t> pattern_hybrid_heads(const gguf_hf::Meta& m);

}  // namespace attnzoo
