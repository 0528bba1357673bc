#pragma once
// What a layer remembers per sequence (DESIGN-SKETCH seam 2). Every layer type describes its per-sequence
// memory with one CacheSpec; `attnzoo inspect`, admission control and the explainer all use bytes_for() so the
// figure has one formula. The state itself is a LayerState owned by the sequence (SequenceState in batch.h).
#include <cstdint>
#include <string>

#include "core/aligned_buffer.h"
#include "core/tensor.h"
#include "kernels/softmax/decode.h"

namespace attnzoo {

struct CacheSpec {
  std::string kind;             // "kv" (softmax K and V), later "latent", "state" ...
  int64_t bytes_per_token = 0;  // grows with the sequence
  int64_t fixed_bytes = 0;      // independent of length (recurrent state, conv tail)
  int64_t block_tokens = 0;     // allocation granularity in tokens
  int64_t max_tokens = 0;       // >0: the layer keeps at most this many tokens (sliding window ring)

  // Bytes held for a sequence of `tokens` tokens, rounded up to whole blocks.
  int64_t bytes_for(int64_t tokens) const;
};

// Base of every per-layer, per-sequence state.
class LayerState {
 public:
  virtual ~LayerState() = default;
  virtual int64_t bytes() const = 0;  // memory actually held
};

// A contiguous per-sequence K/V cache, f32, [capacity, Hkv, D] for each of K and V. Capacity grows in whole
// blocks (doubling, so appends are amortised O(1)); tokens stay contiguous so both attention kernels read it
// directly: decode as a contiguous [1, capacity, Hkv, D] cache, prefill as [1, stored, Hkv, D] keys.
// With a sliding window the cache drops its oldest tokens once more than window + block_tokens are stored,
// keeping the last `window` (all a later query can see). The kernels align queries bottom-right and the window
// is relative, so attending over the kept suffix gives the same result as over the whole history.
class KvCache : public LayerState {
 public:
  static constexpr int64_t kDefaultBlockTokens = 256;

  KvCache(int64_t kv_heads, int64_t head_dim, int64_t block_tokens = kDefaultBlockTokens, int64_t window = 0);
  static CacheSpec spec(int64_t kv_heads, int64_t head_dim, int64_t block_tokens = kDefaultBlockTokens,
                        int64_t window = 0);

  int64_t length() const { return dropped_ + stored_; }  // tokens seen
  int64_t stored() const { return stored_; }             // tokens held (the last stored() of them)
  int64_t capacity() const { return capacity_; }
  int64_t bytes() const override { return 2 * capacity_ * token_elems_ * int64_t(sizeof(float)); }

  // Appends T tokens; k/v token t starts at k + t * src_token_stride and holds Hkv * D values.
  void append(const float* k, const float* v, int64_t T, int64_t src_token_stride);
  // Forgets everything after `length` tokens (rejected speculative tokens, re-prefill). A windowed cache can
  // only go back to the oldest token it still holds.
  void truncate(int64_t length);

  TensorView keys() const;    // [1, stored, Hkv, D]
  TensorView values() const;  // [1, stored, Hkv, D]
  // For attention_decode: contiguous B = 1, S_max = capacity; cache_seqlens points at the stored count.
  KvCacheView decode_view() const;

 private:
  void reserve(int64_t tokens);
  void drop_outside_window();
  int64_t kv_heads_, head_dim_, token_elems_, block_tokens_, window_;
  int64_t dropped_ = 0, stored_ = 0, capacity_ = 0;
  int32_t stored32_ = 0;
  AlignedBuffer<float> k_, v_;
};

}  // namespace attnzoo
