#pragma once
// Softmax attention of a ragged batch over the pool's paged K/V: the step every softmax layer shares once its
// new tokens' K/V are in the cache. A decode step (every sequence brings the same 1..kMaxDecodeQueries tokens)
// is one call of the paged decode kernel over the whole batch, split-K across threads; anything else goes
// sequence by sequence, decode or prefill by its own length.
#include <cstdint>

#include "kernels/softmax/options.h"
#include "layers/batch.h"
#include "core/tensor.h"

namespace attnzoo {

// q [T, Hq, D] f32 packed like the batch's tokens -> out [T, Hq, Dv] f32; k_cache / v_cache are the layer's
// paged tensors [num_blocks, block_tokens, Hkv, D | Dv], already holding the batch's new tokens.
void paged_attention(const float* q, int64_t Hq, int64_t D, const Batch& batch, const TensorView& k_cache,
                     const TensorView& v_cache, const AttentionOptions& opts, float* out);

}  // namespace attnzoo
