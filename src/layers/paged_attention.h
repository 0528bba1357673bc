#pragma once
// Softmax attention of a ragged batch over the pool's paged K/V: the step every softmax layer shares once its
// new tokens' K/V are in the cache. A decode step (every sequence brings the same 1..kMaxDecodeQueries tokens)
// is one call of the paged decode kernel over the whole batch, split-K across threads; otherwise every
// prefilling sequence of the batch goes into one packed varlen prefill call that reads K/V through the block
// tables, and any decoding sequences beside them take the decode kernel one by one.
#include <cstdint>

#include "kernels/softmax/options.h"
#include "layers/batch.h"
#include "core/tensor.h"
#include "state/layer_memory.h"

namespace attnzoo {

// q [T, Hq, D] f32 packed like the batch's tokens -> out [T, Hq, Dv] f32; memory.k / memory.v are the layer's
// paged tensors [num_blocks, block_tokens, Hkv, D | Dv] (with their scales in an int8 / fp8 pool), already
// holding the batch's new tokens.
void paged_attention(const float* q, int64_t Hq, int64_t D, const Batch& batch, const LayerMemory& memory,
                     const AttentionOptions& opts, float* out);

}  // namespace attnzoo
