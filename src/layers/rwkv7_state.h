#pragma once
// What one RWKV-7 layer remembers per sequence, and the token shift that reads it.
//
// Per layer and sequence, one f32 buffer laid out as
//   [ attn_shift (hidden) | ffn_shift (hidden) | wkv (H, K, V) ]
// attn_shift / ffn_shift: the last token the time mix / channel mix saw (their normed inputs), so the next piece
// of the sequence shifts against its own previous token; wkv: the time mix's matrix state S [K, V] per head.
// The size does not grow with the sequence: it is one state slot of the memory pool.
#include <cstdint>
#include <functional>

#include "layers/batch.h"
#include "state/layer_memory.h"

namespace attnzoo {

// A view of one sequence's pool slot for one layer.
class Rwkv7State {
 public:
  static int64_t elements(int64_t hidden, int64_t heads, int64_t head_k_dim, int64_t head_v_dim) {
    return 2 * hidden + heads * head_k_dim * head_v_dim;
  }
  // Sequence s's slot of the layer whose memory is `memory`.
  Rwkv7State(const LayerMemory& memory, const Batch& batch, int64_t s, int64_t hidden)
      : base_(memory.state(batch.state_slots[size_t(s)])), hidden_(hidden) {}
  float* attn_shift() const { return base_; }
  float* ffn_shift() const { return base_ + hidden_; }
  float* wkv() const { return base_ + 2 * hidden_; }

 private:
  float* base_;
  int64_t hidden_;
};

// fla's token_shift over a ragged batch: delta[t] = x[t - 1] - x[t] within each sequence, where the token before
// a sequence's first new token is shift_of(s) (zeros for a fresh sequence). Then shift_of(s) = that sequence's
// last new token. x, delta [T, dim].
void rwkv7_token_shift(const float* x, const Batch& batch, int64_t dim, const std::function<float*(int64_t)>& shift_of,
                       float* delta);

}  // namespace attnzoo
