#pragma once
// Readers for config.json settings that several architectures share, written once so every builder reads them
// the way transformers does.
#include <cstdint>

#include "layers/rope.h"
#include "loader/config.h"
#include "loader/rotary_share.h"

namespace attnzoo {

// RoPE settings: "rope_parameters" (transformers >= 5) or "rope_scaling" (older), with rope_theta and
// partial_rotary_factor either inside it or at the top level; `share` (rotary_share of the model type) says whether
// the architecture reads the factor at all. Unsupported rope types -> LoadError.
RopeConfig read_rope(const Config& c, int64_t head_dim, RotaryShare share);

// The longest sequence the model serves: max_position_embeddings (0: unbounded), or for YaRN the context it was
// extended to, original_max_position_embeddings * factor, as vLLM derives it: Qwen's instructions add a yarn
// rope_scaling and leave max_position_embeddings at the original length. Never below max_position_embeddings.
int64_t context_length(const Config& c);

// Sliding window of layer i (0 = full attention), from layer_types / sliding_window / use_sliding_window (and, for
// Qwen2 / Qwen3 configs without layer_types, max_window_layers), as transformers reads them.
int64_t layer_window(const Config& c, int64_t i, int64_t num_layers);

}  // namespace attnzoo
