#pragma once
// What one RWKV-7 layer remembers per sequence, and the token shift that reads it.
//
// Per layer and sequence, one f32 buffer laid out as
//   [ attn_shift (hidden) | wkv (H, K, V) | ffn_shift (hidden) ]
// attn_shift / ffn_shift: the last token the time mix / channel mix saw (their normed inputs), so the next piece
// of the sequence shifts against its own previous token; wkv: the time mix's matrix state S [K, V] per head.
// The size does not grow with the sequence (CacheSpec fixed_bytes).
#include <cstdint>
#include <functional>

#include "core/aligned_buffer.h"
#include "layers/batch.h"
#include "layers/kv_cache.h"

namespace attnzoo {

class Rwkv7State : public LayerState {
 public:
  Rwkv7State(int64_t hidden, int64_t heads, int64_t head_k_dim, int64_t head_v_dim);
  static int64_t elements(int64_t hidden, int64_t heads, int64_t head_k_dim, int64_t head_v_dim) {
    return 2 * hidden + heads * head_k_dim * head_v_dim;
  }
  int64_t bytes() const override { return elems_ * int64_t(sizeof(float)); }
  float* attn_shift() { return buf_.data(); }
  float* wkv() { return buf_.data() + hidden_; }
  float* ffn_shift() { return buf_.data() + elems_ - hidden_; }

 private:
  int64_t hidden_, elems_;
  AlignedBuffer<float> buf_;
};

// fla's token_shift over a ragged batch: delta[t] = x[t - 1] - x[t] within each sequence, where the token before
// a sequence's first new token is shift_of(s) (zeros for a fresh sequence). Then shift_of(s) = that sequence's
// last new token. x, delta [T, dim].
void rwkv7_token_shift(const float* x, const Batch& batch, int64_t dim, const std::function<float*(int64_t)>& shift_of,
                       float* delta);

}  // namespace attnzoo
