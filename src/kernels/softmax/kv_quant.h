#pragma once
// Quantized KV caches (int8 and fp8 e4m3): every cached row of every head is stored in one byte per element
// with one f32 scale beside it, value = stored * scale. The scale is the row's absolute maximum over the
// format's largest value (127 for int8, 448 for e4m3), so a row never saturates and uses the whole range.
// fp8 takes per-row scales too, not vLLM's default of one scale of 1.0 per tensor: without calibration a
// scale of 1.0 flushes rows of small keys into e4m3's subnormals and clips rows past 448 (Qwen2's K biases),
// while a per-row scale costs 4 bytes per 128 (3%) and shares its layout and code with int8.
//
// Scales sit in their own f32 tensor, one per cache tensor, shaped like the cache without head_dim:
// [num_blocks, block_size, heads] (paged) or [batch, max_seqlen, heads]; the pool gives every paged layer's
// tensor one, so block copies, copy on write and the prefix cache carry them with the blocks.
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/tensor.h"

namespace attnzoo {

// One e4m3 byte, as an element type the kernels can template on (int8_t serves int8 caches).
struct Fp8E4M3 {
  uint8_t bits;
};

// Element strides of a scale tensor; data == nullptr for an unquantized cache.
struct KvScaleView {
  const float* data = nullptr;
  int64_t block = 0, token = 0, head = 0;

  float at(int64_t block_index, int64_t row, int64_t h) const { return data[block_index * block + row * token + h * head]; }
};

// The largest stored magnitude of a quantized format.
float kv_quant_max(DType t);

// Quantizes n f32 values into dst (i8 or f8_e4m3) and returns the row's scale: amax / kv_quant_max. An
// all-zero row stores zeros with scale 0; a row holding NaN or Inf stores zeros with a NaN scale, so attention
// over it gives NaN as an f32 cache would.
float quantize_kv_row(const float* x, size_t n, DType t, void* dst);

// dst[i] = stored[i] * scale (the slow, exact path: set-up code, tile packing and references).
void dequantize_kv_row(const void* src, DType t, float scale, float* dst, size_t n);

// A cache tensor's dtype: f32 / bf16 / f16, or i8 / f8_e4m3 (DTypeError naming `name` otherwise).
void check_kv_cache_dtype(const TensorView& t, const char* name);
// The same for a cache on any device (the decode entry, which also runs on a GPU).
void check_kv_cache_operand(const TensorView& t, const char* name);

// Checks a quantized cache tensor's scale tensor (f32, shape = the cache's without its last dim, non-negative
// strides) or that an unquantized one has none; returns its strides. `cache` has [blocks, rows, (heads,) dim].
KvScaleView check_kv_scale(const TensorView& cache, const TensorView& scale, const char* cache_name,
                           const char* scale_name);

}  // namespace attnzoo
