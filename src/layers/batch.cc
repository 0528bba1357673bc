#include "layers/batch.h"

#include "core/error.h"

namespace attnzoo {

void fill_batch_memory(const CacheManager& cache, Batch& batch) {
  const size_t S = size_t(batch.num_sequences());
  thread_local std::vector<int64_t> context, added;  // kept between calls: a decode step allocates nothing
  context.resize(S);
  added.resize(S);
  batch.context_lens.resize(S);
  batch.cache_seqlens.resize(S);
  batch.state_slots.resize(S);
  for (size_t s = 0; s < S; ++s) {
    const Sequence& seq = *batch.sequences[s];
    context[s] = seq.length();
    added[s] = batch.seq_len(int64_t(s));
    require(context[s] + added[s] < (int64_t(1) << 31), "tokens", "a sequence may hold at most 2^31 - 1 tokens");
    batch.context_lens[s] = int32_t(context[s]);
    batch.cache_seqlens[s] = int32_t(context[s] + added[s]);
    batch.state_slots[s] = seq.state_slot();
  }
  cache.fill_batch_tables(batch.sequences, context, added, batch.block_groups);
}

}  // namespace attnzoo
