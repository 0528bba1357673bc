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
// holding the batch's new tokens. bf16_queries: the layer's projections take reduced-precision products
// (reduced_products, layers/matmul_precision.h); a prefill over a bf16 cache then rounds its queries to bf16 so
// the scores and P V run on bf16 tiles (AMX or vdpbf16ps, where bf16_tiles_enabled()) instead of widening every
// K / V tile to f32 for each block of queries. Decode steps, batch-invariant mode and other caches ignore it.
void paged_attention(const float* q, int64_t Hq, int64_t D, const Batch& batch, const LayerMemory& memory,
                     const AttentionOptions& opts, float* out, bool bf16_queries = false);

}  // namespace attnzoo
