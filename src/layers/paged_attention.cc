#include "layers/paged_attention.h"

#include <vector>

#include "core/batch_invariance.h"
#include "kernels/softmax/attention.h"
#include "kernels/softmax/decode.h"
#include "layers/sequence_schedule.h"

namespace attnzoo {

void paged_attention(const float* q, int64_t Hq, int64_t D, const Batch& batch, const LayerMemory& memory,
                     const AttentionOptions& opts, float* out) {
  const int64_t S = batch.num_sequences(), Dv = memory.v.shape[3];
  bool uniform_decode = S > 0 && batch.seq_len(0) <= kMaxDecodeQueries;
  for (int64_t s = 1; s < S && uniform_decode; ++s) uniform_decode = batch.seq_len(s) == batch.seq_len(0);
  const BlockTables& tables = batch.tables(memory);
  auto cache_view = [&](const int32_t* cache_seqlens, const int32_t* block_table) {
    KvCacheView view;
    view.k = memory.k;
    view.v = memory.v;
    view.k_scale = memory.k_scale;
    view.v_scale = memory.v_scale;
    view.cache_seqlens = cache_seqlens;
    view.block_table = block_table;
    view.max_blocks_per_seq = tables.max_blocks;
    return view;
  };
  if (batch_invariant() && !uniform_decode) {
    // Every query on the decode kernel, kMaxDecodeQueries at a time (core/batch_invariance.h): its chunks end
    // at fixed key positions and every score takes one reduction tree, so a query's result depends on its
    // position alone; the tiled prefill kernel sums in another order. A sequence's groups of queries are the
    // rows of a batch of their own, each seeing the keys up to its last query.
    std::vector<int32_t> seqlens, table;
    for (int64_t s = 0; s < S; ++s) {
      const int64_t b = batch.seq_begin(s), n = batch.seq_len(s);
      const int64_t groups = n / kMaxDecodeQueries, rest = n % kMaxDecodeQueries;
      const int32_t* row = tables.block_table(s);
      auto run = [&](int64_t first, int64_t count, int64_t tq) {
        seqlens.resize(size_t(count));
        table.resize(size_t(count * tables.max_blocks));
        for (int64_t g = 0; g < count; ++g) {
          seqlens[size_t(g)] = int32_t(batch.cache_seqlens[size_t(s)] - n + first + (g + 1) * tq);
          std::copy(row, row + tables.max_blocks, table.begin() + g * tables.max_blocks);
        }
        attention_decode(TensorView::contiguous(const_cast<float*>(q) + (b + first) * Hq * D, DType::f32, {count, tq, Hq, D}),
                         cache_view(seqlens.data(), table.data()),
                         TensorView::contiguous(out + (b + first) * Hq * Dv, DType::f32, {count, tq, Hq, Dv}), opts);
      };
      if (groups > 0) run(0, groups, kMaxDecodeQueries);
      if (rest > 0) run(groups * kMaxDecodeQueries, 1, rest);
    }
    return;
  }
  if (uniform_decode) {
    const int64_t n = batch.seq_len(0);
    attention_decode(TensorView::contiguous(const_cast<float*>(q), DType::f32, {S, n, Hq, D}),
                     cache_view(batch.cache_seqlens.data(), tables.block_table(0)),
                     TensorView::contiguous(out, DType::f32, {S, n, Hq, Dv}), opts);
    return;
  }
  // A mixed batch: its decoding sequences one by one on the split-K decode kernel, ...
  for (int64_t s = 0; s < S; ++s) {
    const int64_t b = batch.seq_begin(s), n = batch.seq_len(s);
    if (n == 0 || n > kMaxDecodeQueries) continue;
    attention_decode(TensorView::contiguous(const_cast<float*>(q) + b * Hq * D, DType::f32, {1, n, Hq, D}),
                     cache_view(batch.cache_seqlens.data() + s, tables.block_table(s)),
                     TensorView::contiguous(out + b * Hq * Dv, DType::f32, {1, n, Hq, Dv}), opts);
  }
  // ... and all its prefilling sequences as one packed varlen prefill reading K/V through their block tables.
  const PrefillGroup group = prefill_group(batch, kMaxDecodeQueries, tables);
  if (group.num_sequences() == 0) return;
  VarlenInfo varlen;
  varlen.cu_seqlens_q = group.cu_seqlens.data();
  varlen.num_seqs = group.num_sequences();
  const int64_t M = group.num_tokens();
  run_packed(group, batch, q, Hq * D, out, Hq * Dv, [&](float* qp, float* op) {
    attention_prefill(TensorView::contiguous(qp, DType::f32, {M, Hq, D}),
                      cache_view(group.cache_seqlens.data(), group.block_tables.data()),
                      TensorView::contiguous(op, DType::f32, {M, Hq, Dv}), opts, varlen);
  });
}

}  // namespace attnzoo
