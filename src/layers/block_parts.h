#pragma once
// The two interfaces a decoder block is built from, so architectures compose layers instead of the engine
// knowing them: a SequenceMixer (softmax attention, MLA, Gated DeltaNet, Mamba-2, short conv ...) mixes
// information across the tokens of each sequence, in the memory the pool hands it for its layer (described by its
// CacheSpec); a FeedForward (gated MLP, MoE) works token by token.
#include <cstdint>
#include <memory>
#include <string>

#include "layers/batch.h"
#include "layers/layer_trace.h"
#include "state/cache_spec.h"
#include "state/layer_memory.h"

namespace attnzoo {

class SequenceMixer {
 public:
  virtual ~SequenceMixer() = default;
  // The layer's per-sequence memory, one formula for inspect / admission / the explainer and the pool.
  virtual CacheSpec cache_spec() const = 0;
  // x [T, hidden] for the batch's packed tokens -> out [T, hidden]; reads and extends every sequence's memory in
  // `memory` (this layer's share of the pool) through the batch's block tables and state slots.
  virtual void forward(const float* x, const Batch& batch, const LayerMemory& memory, float* out) const = 0;
  virtual uint64_t weight_bytes() const = 0;
  // "attention", "sliding_attention", "linear_attention", "mamba", ... (what `inspect` prints per layer).
  virtual std::string kind() const = 0;
  virtual int64_t window() const { return 0; }
  // Explainer hook, called right after forward() on the same x and batch (one sequence): fills what the layer
  // computed (attention: q and k after RoPE; recurrent mixers: state norms). Default: only `kind`.
  virtual void trace(const float* x, const Batch& batch, const LayerMemory& memory, LayerTrace& out) const {
    (void)x, (void)batch, (void)memory;
    out.kind = kind();
  }
};

class FeedForward {
 public:
  virtual ~FeedForward() = default;
  // x [T, hidden] -> out [T, hidden].
  virtual void forward(const float* x, int64_t T, float* out) const = 0;
  virtual uint64_t weight_bytes() const = 0;
  // Weights one decode token reads (MoE: the routed top-k experts plus shared parts, not every expert).
  virtual uint64_t decode_weight_bytes() const { return weight_bytes(); }
};

}  // namespace attnzoo
