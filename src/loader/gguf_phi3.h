#pragma once
// Phi-3's GGUF form (llama.cpp's convert_hf_to_gguf.py Phi3MiniModel), read back as its config.json: LongRoPE's
// factor sets are stored as the F32 tensors rope_factors_long / rope_factors_short ([rotary_dim / 2] each) and its
// attention factor as phi3.rope.scaling.attn_factor; the rotary width is rope.dimension_count, the pretraining
// context rope.scaling.original_context_length, and sliding_window 0 means none. The fused qkv_proj and
// gate_up_proj keep their rows: attn_qkv and ffn_up (the names are in gguf_checkpoint.cc's table).
#include <string>

#include "loader/gguf.h"
#include "loader/gguf_hf_util.h"

namespace attnzoo {

// Adds Phi-3's keys to `c` (partial_rotary_factor, original_max_position_embeddings, rope_scaling, sliding_window).
void add_phi3_config(gguf_hf::JsonObject& c, const GgufFile& f, int64_t head_dim);

// Whether `name` is one of the tensors add_phi3_config reads into the config (not a weight).
bool is_phi3_rope_factors(const std::string& name);

}  // namespace attnzoo
