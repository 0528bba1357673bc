#pragma once
// gpt-oss's GGUF form (llama.cpp's convert_hf_to_gguf.py GptOssModel, architecture "gpt-oss"), read back as the
// Hugging Face checkpoint: attn_sinks.weight is self_attn.sinks, ffn_gate_inp the biased router (mlp.router),
// post_attention_norm the pre-feedforward norm; each layer's experts are stacked [n_expert, rows, cols] as
// ffn_gate_exps / ffn_up_exps (gate_up's even and odd rows, split) and ffn_down_exps, with biases
// ffn_*_exps.bias [n_expert, rows], exposed one projection per expert (mlp.experts.<e>.{gate,up,down}_proj), any
// storage format (MXFP4 as the converter keeps the released checkpoints' experts). The keys: expert_count,
// expert_used_count, expert_feed_forward_length, attention.sliding_window, and llama.cpp's layer pattern (every
// other layer slides, starting with the first; attention.sliding_window_pattern when present). The clamped SwiGLU's
// alpha 1.702 and limit 7 are fixed in llama.cpp, so a file has no key for them; YaRN is read with truncate false,
// as every gpt-oss release sets it.
#include <string>
#include <vector>

#include "loader/gguf.h"
#include "loader/gguf_hf_util.h"

namespace attnzoo {

// Adds gpt-oss's own keys to `c` (num_local_experts, num_experts_per_tok, intermediate_size when the file has no
// feed_forward_length, sliding_window, layer_types).
void add_gpt_oss_config(gguf_hf::JsonObject& c, const GgufFile& f, int64_t layers, bool has_feed_forward_length);

// The Hugging Face tensors of block tensor `t` ("blk.N.<rest>") when gpt-oss names it its own way (sinks, stacked
// experts and their biases), appended to `out`; false for the names the shared table maps. `layer`:
// "model.layers.N.".
bool add_gpt_oss_tensor(const GgufFile& f, const GgufTensor& t, const std::string& layer, const std::string& rest,
                        std::vector<GgufHfTensor>& out);

}  // namespace attnzoo
