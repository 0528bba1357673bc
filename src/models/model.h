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
#include "models/device_runner.h"
#include "models/format_choice.h"
#include "state/cache_manager.h"
#include "state/cache_storage.h"
#include "layers/layer_trace.h"
#include "loader/config.h"

namespace attnzoo {

struct LoadOptions {
  // Precision the projection weights are held in. f32: f32 and bf16 checkpoints stay borrowed from the mapping
  // (bf16 is widened in the kernels, exactly; where AMX runs, bf16 rows off a cache line are copied onto lines
  // once, layers/linear.h), f16 is widened once. bf16: f32/f16 weights are rounded once into
  // owned bf16 copies (half the bytes per decode step). Activations are f32 either way.
  DType weights = DType::f32;
  // The memory pool every sequence of the model lives in: block size, KV element dtype, byte budget, state
  // slots, prefix caching (state/cache_geometry.h).
  PoolOptions pool;
  // Why weights and pool.kv_dtype are what they are when resolve_formats chose them (load_options below); kept
  // in ModelInfo::formats for inspect, serve and Python's Model.formats.
  FormatChoice formats;
};

// The options resolve_formats chose (format_choice.h): weights, the pool's KV dtype and the reasons; the pool's
// other settings at their defaults.
LoadOptions load_options(const FormatChoice& formats);

struct LayerInfo {
  std::string kind;  // "attention" or "sliding_attention"
  int64_t window = 0;
  CacheSpec cache;
};

// Where a model's context (ModelInfo::max_position_embeddings) comes from, for the messages that refuse past it.
inline constexpr const char* kContextOrigin = "max_position_embeddings, or YaRN's original length * factor";

struct ModelInfo {
  std::string architecture, model_type;
  int64_t vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_layers = 0;
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0, max_position_embeddings = 0;
  bool tied_embeddings = false;
  std::string checkpoint_dtype;   // config dtype string ("" if unset)
  DType weights = DType::f32;     // precision the projections run with
  // The formats the model was loaded with and why: weights and kv_cache as held, whoever chose them.
  FormatChoice formats;
  int64_t parameter_count = 0;    // elements of every tensor in the checkpoint
  uint64_t checkpoint_bytes = 0;  // bytes of every tensor in the checkpoint (borrowed through the mapping)
  uint64_t owned_weight_bytes = 0;  // copies made at load (converted, regrouped or moved onto cache lines)
  // The checkpoint bytes those copies stand in for, their mapped pages released by the loader as each copy read
  // them (models/weight_bytes.h): resident weights are about
  // checkpoint_bytes - released_weight_bytes + owned_weight_bytes.
  uint64_t released_weight_bytes = 0;
  // Weight bytes one decode step streams: every layer's projections and the lm_head as held (not the
  // embedding table, of which one row is read). Set by DecoderModel.
  uint64_t decode_weight_bytes = 0;
  std::vector<LayerInfo> layers;

  // Per-sequence cache bytes after `tokens` tokens, summed over the layers' CacheSpecs (paged parts rounded up
  // to whole blocks of `block_tokens`; a sliding-window layer counted at the blocks its block group keeps).
  int64_t cache_bytes_for(int64_t tokens, int64_t block_tokens) const;
  int64_t cache_bytes_per_token() const;
  int64_t cache_fixed_bytes() const;
};

class Model {
 public:
  virtual ~Model() = default;

  // Opens the directory, picks the builder named by config.json "architectures", builds the model and sizes its
  // memory pool. Throws LoadError naming an unknown architecture, a missing tensor or a tensor of the wrong shape.
  static std::unique_ptr<Model> load(const std::string& dir, const LoadOptions& options = {});

  virtual const ModelInfo& info() const = 0;
  virtual const Config& config() const = 0;
  // The memory pool in its two halves (vLLM v1's split): the bookkeeping (which blocks and state slots belong to
  // which sequence, the prefix cache), shared with whoever schedules sequences (the engine's scheduler holds it),
  // and the memory it describes, which only the model reads and writes. The bookkeeping's memory moves (copy on
  // write, state forks / snapshots / restores) reach the memory at the start of the next forward pass.
  CacheManager& cache() const { return *cache_; }
  const std::shared_ptr<CacheManager>& shared_cache() const { return cache_; }
  const CacheStorage& storage() const { return *storage_; }

  // An empty sequence in the model's pool (PoolExhausted when every state slot is taken).
  std::unique_ptr<Sequence> new_sequence() const { return cache_->new_sequence(); }
  // A sequence that continues from `parent`'s tokens: blocks shared copy-on-write, state copied.
  std::unique_ptr<Sequence> fork(const Sequence& parent) const { return cache_->fork(parent); }

  // Runs the batch's new tokens through the model, writing every sequence's memory in the pool, and advances
  // each sequence. Returns logits [logits_indices.size(), vocab] row-major: row i for packed token
  // logits_indices[i] (vLLM's logits_indices; empty span: every token). A fresh sequence whose only requested
  // row is its last token reuses the longest cached prefix of its prompt and computes only the rest (unless the
  // batch says its caller looked the prefix up already: Batch::reuse_cached_prefix). Blocks the caller reserved
  // (CacheManager::reserve) are used as they are; the rest are reserved here. Validates the batch
  // (ArgumentError naming the field); PoolExhausted, before anything is written, when the pool cannot hold the
  // new tokens. If another exception escapes mid-way, the sequences' memory is unspecified:
  // discard them.
  std::vector<float> forward(const Batch& batch, std::span<const int64_t> logits_indices) const;
  // Every token's logits, or only each sequence's last (last_only).
  std::vector<float> forward(const Batch& batch, bool last_only = false) const;
  // The same into the caller's `logits` (exactly [rows, vocab] floats, ArgumentError naming "logits" otherwise):
  // with a reused Batch (Batch::clear) and logits buffer, a decode step allocates nothing once the first step has
  // sized the per-thread workspaces, except where a sequence's own token list or block table must grow.
  void forward(const Batch& batch, std::span<const int64_t> logits_indices, std::span<float> logits) const;
  // The same rows left where the model computed them, f32 [rows, vocab]: the runner's device memory for a model
  // on a GPU (valid until its next forward pass, ready in order on the current stream), so a caller that samples
  // there (engine/sample_rows.h) brings only the ids back; `host` otherwise (grown to [rows, vocab] when smaller,
  // never shrunk: a reused vector keeps a decode step allocation-free). A batch computed in pieces (a recurrent
  // model snapshotting its state for the prefix cache, per-token checkpoints) or rows asked out of packed order
  // are gathered into `host` on every device.
  TensorView forward_logits(const Batch& batch, std::span<const int64_t> logits_indices,
                            std::vector<float>& host) const;

  // Speculative decoding's rollback, one operation: `seq` back at `length` tokens (a length it had), its memory
  // as if it had only ever seen those. Paged (softmax / MLA) memory is truncated, blocks past it freed; recurrent
  // state is restored from the latest CacheManager::checkpoint at or below `length` and the tokens between are
  // recomputed in one forward pass (no logits). A batch with `checkpoint_each_token` set leaves a checkpoint
  // after every token instead, so its rollback needs no recompute. Errors: see CacheManager::rollback.
  void rollback(Sequence& seq, int64_t length) const;

  // Explainer hook: runs `ids` as a fresh sequence and returns one LayerTrace per layer (attention: q and k
  // after RoPE; recurrent layers: state norms). Slow path, short prompts. ArgumentError for bad ids or a model
  // that cannot trace.
  std::vector<LayerTrace> trace(std::span<const int32_t> ids) const;

 protected:
  // The compute of one forward pass, what an architecture implements: `batch` has its memory fields filled (block
  // tables, slot mapping, state slots) and the memory is current; logits row i is for packed token rows[i]. It
  // reads and writes the cache memory through layer_memory() and never touches the bookkeeping.
  virtual void run(const Batch& batch, std::span<const int64_t> rows, float* logits) const = 0;
  virtual std::vector<LayerTrace> run_trace(const Batch& batch) const;
  LayerMemory layer_memory(int64_t layer) const { return storage_->layer(layer); }
  // The runner that computes this model on `device` with a KV cache of `kv_dtype` (Model::load calls it when the
  // pool is on a GPU, before the pool is sized): its refusals by name first, then the weights uploaded. The
  // default refuses the architecture; DecoderModel's covers the Llama family (models/cuda/).
  virtual std::unique_ptr<DeviceRunner> make_device_runner(Device device, DType kv_dtype) const;

 private:
  // Fills the batch's block tables, slot mapping and state slots from the bookkeeping (its new tokens reserved)
  // and brings the memory up to date with it (the queued moves), so run() only computes.
  void prepare(Batch& batch) const;
  // forward() with the rows already resolved, logits [wanted.size(), vocab] into `host`, or left in the device
  // runner's memory (leave_on_device, where the batch runs in one piece and its rows in packed order); returns
  // where they are. `wanted` empty computes no logits at all (`host` may be null; the view is empty).
  TensorView forward_rows(const Batch& batch, std::span<const int64_t> wanted, float* host, bool leave_on_device) const;
  std::shared_ptr<CacheManager> cache_;
  std::unique_ptr<CacheStorage> storage_;
  std::unique_ptr<DeviceRunner> runner_;  // null: run() on the host
};

}  // namespace attnzoo
