#pragma once
// The checkpoint layout transformers' Mamba and Mamba-2 models share around their mixers: backbone.embeddings
// (older conversions: backbone.embedding), backbone.layers.<i>.{norm, mixer}, backbone.norm_f and lm_head (or
// tied). Blocks have no feed-forward; the builders supply only the mixer.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "layers/block_parts.h"
#include "loader/model_dir.h"
#include "models/model.h"
#include "models/weight_bytes.h"

namespace attnzoo {

struct BackboneLayoutParts {
  float norm_eps = 1e-5f;
  bool tie_fallback = false;  // ties_embeddings' fallback when config.json does not say
  // Called in layer order with `prefix` backbone.layers.<layer>.mixer.
  std::function<std::unique_ptr<SequenceMixer>(const std::string& prefix)> mixer;
};

// Loads the layout's tensors around the mixers (Linears held as `store`, converted bytes added to `owned`),
// records each mixer's LayerInfo in info.layers, sets info.tied_embeddings and info.owned_weight_bytes. `files` and
// `info` are moved into the model only at the very end, so the mixer factory may read them.
std::unique_ptr<Model> assemble_backbone_layout(ModelFiles&& files, ModelInfo&& info, const BackboneLayoutParts& parts,
                                                DType store, WeightBytes& owned);

}  // namespace attnzoo
