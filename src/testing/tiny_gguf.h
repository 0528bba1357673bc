#pragma once
// A tiny decoder (tiny_decoder.h) quantized to a GGUF file the way `attnzoo quantize` writes one. Its rows of 128
// and 256 columns make llama-quantize's fallbacks happen: Q4_K asked, the 128-column projections (q / k / v, gate,
// up) take Q5_0 and the 256-column ones (o, down) Q4_K; the embedding and head Q8_0.
#include <string>

#include "convert/gguf_export.h"
#include "testing/tiny_decoder.h"

namespace attnzoo::testing {

// Writes the checkpoint and `dir`/model.gguf of `type` (overrides as `attnzoo quantize` takes them); returns the
// GGUF's path.
inline std::string write_tiny_gguf(const ScratchDir& dir, const TinyDecoder& t, QuantType type,
                                   const TensorPolicy& overrides = {}) {
  write_tiny_decoder(dir, t);
  QuantizeOptions o;
  o.policy = overrides;
  o.policy.type = type;
  const std::string out = (dir.path() / "model.gguf").string();
  quantize_checkpoint(dir.str(), out, o);
  return out;
}

}  // namespace attnzoo::testing
