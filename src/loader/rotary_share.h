#pragma once
// How much of each attention head an architecture rotates, as transformers' code for it decides. Most architectures
// copy Llama's rotary embedding, which rotates the whole head and never reads partial_rotary_factor, though a config
// may carry one (transformers 5 writes any it is given into rope_parameters). The others rotate the first
// partial_rotary_factor * head_dim channels, the factor read from the config or defaulted per architecture.
// The GGUF loaders read it too: llama.cpp rotates rope.dimension_count channels of any architecture, which a
// synthesized config can state only where the architecture reads the factor.
#include <string>

namespace attnzoo {

struct RotaryShare {
  bool read = false;    // partial_rotary_factor from the config when it names one
  double factor = 1.0;  // the share otherwise
};

inline constexpr RotaryShare kWholeHead{};

// The share of a config.json model_type; the whole head, unread, for every architecture not listed.
RotaryShare rotary_share(const std::string& model_type);

}  // namespace attnzoo
