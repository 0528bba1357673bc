#pragma once
// Writing new keys / values into a paged cache: vLLM's reshape_and_cache with its slot_mapping. Token t goes
// to physical slot slot_mapping[t] = block * block_size + offset of the cache; a negative slot skips the token
// (padding). Rows are converted to the cache's dtype (f32 / bf16 / f16; bf16 and f16 round to nearest even), or
// quantized per (token, head) row into an int8 / float8_e4m3fn cache with its scale written beside it
// (kernels/softmax/kv_quant.h).
#include <cstdint>

#include "core/tensor.h"

namespace attnzoo {

// k_new [T, Hkv, D], v_new [T, Hkv, Dv] (any float dtype, last dim contiguous); k_cache [num_blocks,
// block_size, Hkv, D], v_cache [num_blocks, block_size, Hkv, Dv] (f32 / bf16 / f16 / i8 / f8_e4m3, the same
// dtype; the quantized ones with k_scale, v_scale [num_blocks, block_size, Hkv] f32); slot_mapping [T]. Every
// slot is checked before anything is written, so a bad slot writes nothing.
void write_kv_paged(const TensorView& k_new, const TensorView& v_new, const int64_t* slot_mapping,
                    const TensorView& k_cache, const TensorView& v_cache, const TensorView& k_scale = {},
                    const TensorView& v_scale = {});

// One cache: rows [T, ..., D] into cache [num_blocks, block_size, ..., D] (MLA's latent: [T, 1, r + dr] into
// [num_blocks, block_size, 1, r + dr], or without the head axis). `rows_name` / `cache_name` name them in errors.
// A quantized cache takes `scale` shaped like it without its last dim.
void write_paged_rows(const TensorView& rows, const int64_t* slot_mapping, const TensorView& cache,
                      const char* rows_name = "rows", const char* cache_name = "cache", const TensorView& scale = {},
                      const char* scale_name = "scale");

}  // namespace attnzoo
