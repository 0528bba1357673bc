#pragma once
// A causal language model loaded from a Hugging Face directory. The engine sees only this interface: it makes
// sequences, packs their new tokens into a ragged Batch and asks for logits. Architectures are small builders
// (llama.cc ...) registered by their config.json "architectures" name in registry.cc.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "layers/batch.h"
#include "layers/kv_cache.h"
#include "layers/layer_trace.h"
#include "loader/config.h"

namespace attnzoo {

struct LoadOptions {
  // Precision the projection weights are held in. f32: f32 and bf16 checkpoints stay borrowed from the mapping
  // (bf16 is widened in the kernels, exactly), f16 is widened once. bf16: f32/f16 weights are rounded once into
  // owned bf16 copies (half the bytes per decode step). Activations and the KV cache are f32 either way.
  DType weights = DType::f32;
  // KV caches grow (and sliding-window caches drop old tokens) in blocks of this many tokens.
  int64_t kv_block_tokens = KvCache::kDefaultBlockTokens;
};

// "float32"/"f32", "bfloat16"/"bf16", "auto" (= as stored: f32 unless the checkpoint is bf16/f16 -> bf16).
LoadOptions parse_load_dtype(const std::string& dtype, const Config& config);

struct LayerInfo {
  std::string kind;  // "attention" or "sliding_attention"
  int64_t window = 0;
  CacheSpec cache;
};

struct ModelInfo {
  std::string architecture, model_type;
  int64_t vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_layers = 0;
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0, max_position_embeddings = 0;
  bool tied_embeddings = false;
  std::string checkpoint_dtype;   // config dtype string ("" if unset)
  DType weights = DType::f32;     // precision the projections run with
  int64_t parameter_count = 0;    // elements of every tensor in the checkpoint
  uint64_t checkpoint_bytes = 0;  // bytes of every tensor in the checkpoint (borrowed through the mapping)
  uint64_t owned_weight_bytes = 0;  // converted copies made at load
  // Weight bytes one decode step streams: every layer's projections and the lm_head as held (not the
  // embedding table, of which one row is read). Set by DecoderModel.
  uint64_t decode_weight_bytes = 0;
  std::vector<LayerInfo> layers;

  // Per-sequence cache bytes after `tokens` tokens, summed over the layers' CacheSpecs.
  int64_t cache_bytes_for(int64_t tokens) const;
  int64_t cache_bytes_per_token() const;
};

class Model {
 public:
  virtual ~Model() = default;

  // Opens the directory, picks the builder named by config.json "architectures" and builds the model.
  // Throws LoadError naming an unknown architecture, a missing tensor or a tensor of the wrong shape.
  static std::unique_ptr<Model> load(const std::string& dir, const LoadOptions& options = {});

  virtual const ModelInfo& info() const = 0;
  virtual const Config& config() const = 0;
  // An empty sequence (no tokens yet) with one state per layer.
  virtual std::unique_ptr<SequenceState> new_sequence() const = 0;

  // Runs the batch's new tokens through the model, appending to every sequence's caches, and advances each
  // sequence's length. Returns logits [num_tokens, vocab] row-major, or [num_sequences, vocab] (each sequence's
  // last token) when last_only. Validates the batch (ArgumentError naming the field). If an exception escapes
  // mid-way, the sequences' caches are unspecified: discard them.
  std::vector<float> forward(const Batch& batch, bool last_only = false) const;

  // Explainer hook: runs `ids` as a fresh sequence and returns one LayerTrace per layer (attention: q and k
  // after RoPE; recurrent layers: state norms). Slow path, short prompts. ArgumentError for bad ids or a model
  // that cannot trace.
  std::vector<LayerTrace> trace(std::span<const int32_t> ids) const;

 protected:
  virtual void run(const Batch& batch, bool last_only, float* logits) const = 0;
  virtual std::vector<LayerTrace> run_trace(const Batch& batch) const;
};

}  // namespace attnzoo
