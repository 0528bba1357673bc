#include "layers/paged_attention.h"

#include <algorithm>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/batch_invariance.h"
#include "core/convert.h"
#include "core/dispatch.h"
#include "kernels/softmax/attention.h"
#include "kernels/softmax/decode.h"
#include "layers/sequence_schedule.h"

namespace attnzoo {

void paged_attention(const float* q, int64_t Hq, int64_t D, const Batch& batch, const LayerMemory& memory,
                     const AttentionOptions& opts, float* out, bool bf16_queries) {
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
    // position alone; the tiled prefill kernel sums in another order. Each group of a sequence's queries is a
    // batch row of its own, seeing the keys up to its last query; the groups of one length (full ones, and each
    // remainder length) of all sequences go in one call.
    struct Group {
      int64_t row, seq;
      int32_t seqlen;
    };
    thread_local std::vector<Group> groups;
    thread_local std::vector<int32_t> seqlens, table;
    thread_local std::vector<float> qp, op;
    for (int64_t tq = kMaxDecodeQueries; tq >= 1; --tq) {
      groups.clear();
      for (int64_t s = 0; s < S; ++s) {
        const int64_t b = batch.seq_begin(s), n = batch.seq_len(s), full = n / kMaxDecodeQueries;
        const int32_t cached = batch.cache_seqlens[size_t(s)];
        if (tq == kMaxDecodeQueries) {
          for (int64_t g = 0; g < full; ++g)
            groups.push_back({b + g * tq, s, int32_t(cached - n + (g + 1) * tq)});
        } else if (n % kMaxDecodeQueries == tq) {
          groups.push_back({b + full * kMaxDecodeQueries, s, cached});
        }
      }
      if (groups.empty()) continue;
      const int64_t B = int64_t(groups.size()), q_rows = tq * Hq * D, o_rows = tq * Hq * Dv;
      seqlens.resize(size_t(B));
      table.resize(size_t(B * tables.max_blocks));
      bool adjacent = true;  // the groups' rows already lie one after another: no gather
      for (int64_t i = 0; i < B; ++i) {
        const Group& g = groups[size_t(i)];
        seqlens[size_t(i)] = g.seqlen;
        std::copy_n(tables.block_table(g.seq), tables.max_blocks, table.begin() + i * tables.max_blocks);
        adjacent = adjacent && g.row == groups[0].row + i * tq;
      }
      const float* qg = q + groups[0].row * Hq * D;
      float* og = out + groups[0].row * Hq * Dv;
      if (!adjacent) {
        qp.resize(size_t(B * q_rows));
        op.resize(size_t(B * o_rows));
        for (int64_t i = 0; i < B; ++i)
          std::copy_n(q + groups[size_t(i)].row * Hq * D, q_rows, qp.begin() + i * q_rows);
        qg = qp.data();
        og = op.data();
      }
      attention_decode(TensorView::contiguous(const_cast<float*>(qg), DType::f32, {B, tq, Hq, D}),
                       cache_view(seqlens.data(), table.data()),
                       TensorView::contiguous(og, DType::f32, {B, tq, Hq, Dv}), opts);
      if (!adjacent)
        for (int64_t i = 0; i < B; ++i)
          std::copy_n(op.begin() + i * o_rows, o_rows, out + groups[size_t(i)].row * Hq * Dv);
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
  // The kernel takes its bf16 tiles only when q, K and V are all bf16; rounding q here is what a bf16 model's
  // torch forward does too, and per element, so a sequence's result still depends on its own tokens alone.
  const bool q_bf16 = bf16_queries && memory.k.dtype == DType::bf16 && !memory.k_scale.data && bf16_tiles_enabled();
  run_packed(group, batch, q, Hq * D, out, Hq * Dv, [&](float* qp, float* op) {
    TensorView qv = TensorView::contiguous(qp, DType::f32, {M, Hq, D});
    if (q_bf16) {
      thread_local AlignedBuffer<uint16_t> q16;
      if (q16.size() < size_t(M * Hq * D)) q16.resize(size_t(M * Hq * D));
      convert_from_f32(qp, q16.data(), DType::bf16, size_t(M * Hq * D));
      qv = TensorView::contiguous(q16.data(), DType::bf16, {M, Hq, D});
    }
    attention_prefill(qv, cache_view(group.cache_seqlens.data(), group.block_tables.data()),
                      TensorView::contiguous(op, DType::f32, {M, Hq, Dv}), opts, varlen);
  });
}

}  // namespace attnzoo
