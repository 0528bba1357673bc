#include "loader/rotary_share.h"

namespace attnzoo {

RotaryShare rotary_share(const std::string& t) {
  // The model types whose transformers rotary embedding follows partial_rotary_factor, with their configs' defaults.
  if (t == "phi3" || t == "minimax_m2") return {true, 1.0};
  if (t == "glm4" || t == "glm4_moe") return {true, 0.5};
  if (t == "qwen3_next" || t.rfind("qwen3_5", 0) == 0) return {true, 0.25};
  // Bamba's config puts 0.5 over a top-level factor (a factor in rope_parameters stands); every release has 0.5.
  if (t == "bamba") return {true, 0.5};
  // transformers' GraniteMoeHybrid rotates the whole head, but its releases use no RoPE at all, and llama.cpp's
  // granitehybrid, which Bamba converts to, rotates rope.dimension_count channels: the factor is read so that such
  // a GGUF loads.
  if (t == "granitemoehybrid") return {true, 1.0};
  // Not listed though their frequencies follow the factor: gpt-oss and Ministral 3 rotate the whole head with them,
  // so transformers fails on any factor but 1.
  return {};
}

}  // namespace attnzoo
