#pragma once
// The checkpoint layout transformers' Llama-style decoders share around their per-layer mixer and feed-forward:
// model.embed_tokens, model.layers.<i>.{input_layernorm, post_attention_layernorm}, model.norm and lm_head (or
// tied). Builders whose blocks hold nothing else (Llama family, GPT-OSS, DeepSeek-V3, Kimi Linear, Qwen3-Next)
// supply only the parts.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "layers/block_parts.h"
#include "loader/config.h"
#include "loader/model_dir.h"
#include "models/model.h"
#include "models/weight_bytes.h"

namespace attnzoo {

struct LlamaLayoutParts {
  float norm_eps = 1e-6f;
  bool norm_add_one = false;  // (1 + w) RmsNorms (Qwen3-Next), for every norm of the layout
  bool tie_fallback = false;  // ties_embeddings' fallback when neither config says
  // False for architectures transformers never ties (Kimi Linear): the checkpoint's lm_head.weight is used whatever
  // tie_word_embeddings says, and its absence is an error.
  bool may_tie = true;
  // Called in layer order, each layer's mixer before its feed-forward; `prefix` is model.layers.<layer>.
  std::function<std::unique_ptr<SequenceMixer>(int64_t layer, const std::string& prefix)> mixer;
  std::function<std::unique_ptr<FeedForward>(int64_t layer, const std::string& prefix)> ffn;
};

// Loads the layout's tensors around the parts (Linears held as `store`, converted bytes added to `owned`), records
// each mixer's LayerInfo in info.layers, sets info.tied_embeddings (from `c`, see ties_embeddings) and
// info.owned_weight_bytes. `files` and `info` are moved into the model only at the very end, so the parts may
// read them.
std::unique_ptr<Model> assemble_llama_layout(ModelFiles&& files, const Config& c, ModelInfo&& info,
                                             const LlamaLayoutParts& parts, DType store, WeightBytes& owned);

}  // namespace attnzoo
