#include "layers/paged_attention.h"

#include "core/aligned_buffer.h"
#include "kernels/softmax/attention.h"
#include "kernels/softmax/decode.h"
#include "layers/paged_kv.h"

namespace attnzoo {

void paged_attention(const float* q, int64_t Hq, int64_t D, const Batch& batch, const TensorView& k_cache,
                     const TensorView& v_cache, const AttentionOptions& opts, float* out) {
  const int64_t S = batch.num_sequences(), Hkv = k_cache.shape[2], Dv = v_cache.shape[3];
  bool uniform_decode = S > 0 && batch.seq_len(0) <= kMaxDecodeQueries;
  for (int64_t s = 1; s < S && uniform_decode; ++s) uniform_decode = batch.seq_len(s) == batch.seq_len(0);
  auto cache_view = [&](int64_t first) {
    KvCacheView view;
    view.k = k_cache;
    view.v = v_cache;
    view.cache_seqlens = batch.cache_seqlens.data() + first;
    view.block_table = batch.block_table(first);
    view.max_blocks_per_seq = batch.max_blocks;
    return view;
  };
  if (uniform_decode) {
    const int64_t n = batch.seq_len(0);
    attention_decode(TensorView::contiguous(const_cast<float*>(q), DType::f32, {S, n, Hq, D}), cache_view(0),
                     TensorView::contiguous(out, DType::f32, {S, n, Hq, Dv}), opts);
    return;
  }
  AlignedBuffer<uint8_t> keys, values;
  for (int64_t s = 0; s < S; ++s) {
    const int64_t b = batch.seq_begin(s), n = batch.seq_len(s), L = batch.cache_seqlens[size_t(s)];
    if (n == 0) continue;
    const TensorView qv = TensorView::contiguous(const_cast<float*>(q) + b * Hq * D, DType::f32, {1, n, Hq, D});
    const TensorView ov = TensorView::contiguous(out + b * Hq * Dv, DType::f32, {1, n, Hq, Dv});
    if (n <= kMaxDecodeQueries) {
      KvCacheView view = cache_view(s);
      attention_decode(qv, view, ov, opts);
      continue;
    }
    // Prefill reads the sequence's keys as one contiguous span (copied out of its blocks, in the cache dtype).
    const size_t elem = dtype_size(k_cache.dtype);
    keys.resize(size_t(L * Hkv * D) * elem);
    values.resize(size_t(L * Hkv * Dv) * elem);
    gather_paged_rows(k_cache, batch.block_table(s), L, keys.data(), false);
    gather_paged_rows(v_cache, batch.block_table(s), L, values.data(), false);
    attention_prefill(qv, TensorView::contiguous(keys.data(), k_cache.dtype, {1, L, Hkv, D}),
                      TensorView::contiguous(values.data(), v_cache.dtype, {1, L, Hkv, Dv}), ov, opts);
  }
}

}  // namespace attnzoo
