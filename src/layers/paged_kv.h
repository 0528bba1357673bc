#pragma once
// Moving rows in and out of the pool's paged tensors [num_blocks, block_tokens, heads, head_dim]: how the layers
// write their new tokens' K/V (or MLA latent) rows and read a sequence's rows back as one contiguous span.
#include <cstdint>

#include "core/tensor.h"

namespace attnzoo {

// Row t (heads * head_dim f32 values at src + t * src_stride) goes to pool slot slots[t] (block * block_tokens
// + offset) of `cache`, converted to the cache's dtype.
void write_paged_rows(const float* src, int64_t rows, int64_t src_stride, const int64_t* slots,
                      const TensorView& cache);

// The first `tokens` rows of a sequence, found through its block table, copied contiguously to dst
// ([tokens, heads, head_dim] in the cache's dtype, or widened to f32 when `to_f32`).
void gather_paged_rows(const TensorView& cache, const int32_t* block_table, int64_t tokens, void* dst, bool to_f32);

}  // namespace attnzoo
