#pragma once
// The <arch>.* keys of GLM-4.5 (glm4moe) and MiniMax-M2 (minimax-m2) files, as llama.cpp's convert_hf_to_gguf.py
// (Glm4MoeModel, MiniMaxM2Model) writes them beyond the attention ones every architecture has: expert counts and
// width, sigmoid gating, RoPE width; GLM-4.5's shared experts, leading dense blocks, routed scale / renormalization
// and its multi-token-prediction blocks (written like the converter does: appended blocks, block_count counting
// them). The inverse of loader/gguf_sigmoid_moe.h.
#include <cstdint>
#include <string>

#include "loader/config.h"
#include "loader/gguf_writer.h"
#include "loader/model_dir.h"

namespace attnzoo {

// The checkpoint's multi-token-prediction layers: model.layers.<i>.* with i >= num_hidden_layers (distinct i).
int64_t count_mtp_blocks(const ModelFiles& files, const Config& c);

// Nothing for other architectures. LoadError naming the key GGUF cannot hold: n_group / topk_group that drop
// experts (llama.cpp's glm4moe routes over all of them).
void add_sigmoid_moe_hparams(GgufWriter& w, const Config& c, const std::string& arch, int64_t rotary_dim,
                             int64_t mtp_blocks);

}  // namespace attnzoo
