#include "layers/paged_kv.h"

#include <algorithm>
#include <cstring>

#include "core/convert.h"
#include "core/threads.h"

namespace attnzoo {

void write_paged_rows(const float* src, int64_t rows, int64_t src_stride, const int64_t* slots,
                      const TensorView& cache) {
  const int64_t elems = cache.shape[2] * cache.shape[3];
  const size_t row_bytes = size_t(elems) * dtype_size(cache.dtype);
  auto* base = static_cast<uint8_t*>(cache.data);
  for (int64_t t = 0; t < rows; ++t)
    convert_from_f32(src + t * src_stride, base + size_t(slots[t]) * row_bytes, cache.dtype, size_t(elems));
}

void gather_paged_rows(const TensorView& cache, const int32_t* block_table, int64_t tokens, void* dst, bool to_f32) {
  const int64_t B = cache.shape[1], elems = cache.shape[2] * cache.shape[3];
  const size_t row_bytes = size_t(elems) * dtype_size(cache.dtype);
  const size_t out_row = to_f32 ? size_t(elems) * sizeof(float) : row_bytes;
  const auto* base = static_cast<const uint8_t*>(cache.data);
  auto* out = static_cast<uint8_t*>(dst);
  const int64_t blocks = (tokens + B - 1) / B;
  // One task per block: a long prefix is a few MB of copying that several cores do faster than one.
  ThreadPool::global().parallel_for(blocks, [&](int64_t b, int) {
    const int64_t n = std::min(B, tokens - b * B);
    const uint8_t* from = base + size_t(block_table[b]) * size_t(B) * row_bytes;
    uint8_t* to = out + size_t(b * B) * out_row;
    if (to_f32)
      convert_to_f32(from, cache.dtype, reinterpret_cast<float*>(to), size_t(n * elems));
    else
      std::memcpy(to, from, size_t(n) * row_bytes);
  });
}

}  // namespace attnzoo
