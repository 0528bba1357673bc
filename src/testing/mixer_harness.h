#pragma once
// One sequence mixer on a memory pool of its own, for the layer tests: what Model::forward does around a layer
// (reserve the new tokens' blocks, fill the batch's block tables / slot mapping / state slots, bring the memory
// up to date with the bookkeeping, advance the sequences afterwards), without a model.
#include <memory>
#include <vector>

#include "layers/batch.h"
#include "layers/block_parts.h"
#include "state/cache_manager.h"
#include "state/cache_storage.h"

namespace attnzoo::testing {

class MixerHarness {
 public:
  explicit MixerHarness(const SequenceMixer& mixer, int64_t block_tokens = 16, DType kv_dtype = DType::f32,
                        uint64_t shuffle_seed = 0)
      : mixer_(mixer),
        geometry_(plan_cache({mixer.cache_spec()}, options(block_tokens, kv_dtype, shuffle_seed))),
        pool_(geometry_),
        storage_(geometry_) {}

  std::unique_ptr<Sequence> new_sequence() { return pool_.new_sequence(); }
  CacheManager& pool() { return pool_; }
  // The layer's memory, current with every move the bookkeeping queued.
  LayerMemory memory() {
    pool_.flush(storage_);
    return storage_.layer(0);
  }

  // Fills the batch's memory fields (after reserving its tokens) and runs the mixer; x, y [T, hidden].
  void forward(const float* x, Batch& batch, float* y) {
    prepare(batch);
    mixer_.forward(x, batch, memory(), y);
    for (int64_t s = 0; s < batch.num_sequences(); ++s)
      pool_.advance(*batch.sequences[size_t(s)],
                    std::span(batch.tokens).subspan(size_t(batch.seq_begin(s)), size_t(batch.seq_len(s))));
  }
  // The mixer's trace on a batch forward() has run (its state is the state after that batch).
  void trace(const float* x, const Batch& batch, LayerTrace& out) { mixer_.trace(x, batch, memory(), out); }

 private:
  static PoolOptions options(int64_t block_tokens, DType kv_dtype, uint64_t shuffle_seed) {
    PoolOptions o;
    o.block_tokens = block_tokens;
    o.kv_dtype = kv_dtype;
    o.bytes = int64_t(256) << 20;
    o.max_sequences = 16;
    o.prefix_caching = false;
    o.shuffle_seed = shuffle_seed;
    return o;
  }
  void prepare(Batch& batch) {
    std::vector<int64_t> added;
    for (int64_t s = 0; s < batch.num_sequences(); ++s) added.push_back(batch.seq_len(s));
    pool_.reserve(batch.sequences, added);
    fill_batch_memory(pool_, batch);
  }
  const SequenceMixer& mixer_;
  CacheGeometry geometry_;
  CacheManager pool_;
  CacheStorage storage_;
};

// Runs `mixer` as the only layer of one fresh sequence over x [sum(pieces), hidden], piece after piece (each
// piece one forward call), and returns the outputs row by row.
inline std::vector<float> run_mixer_pieces(const SequenceMixer& mixer, const float* x, int64_t hidden,
                                           const std::vector<int64_t>& pieces) {
  MixerHarness harness(mixer);
  const auto seq = harness.new_sequence();
  int64_t total = 0;
  for (int64_t n : pieces) total += n;
  std::vector<float> out(size_t(total * hidden));
  int64_t start = 0;
  for (int64_t n : pieces) {
    Batch b;
    const std::vector<int32_t> ids(size_t(n), 0);
    b.add(*seq, ids);
    harness.forward(x + start * hidden, b, out.data() + start * hidden);
    start += n;
  }
  return out;
}

// The trace (layers/layer_trace.h) of `mixer` after one fresh sequence's prefill of x [T, hidden].
inline LayerTrace trace_after_prefill(const SequenceMixer& mixer, const float* x, int64_t T, int64_t hidden) {
  MixerHarness harness(mixer);
  const auto seq = harness.new_sequence();
  Batch b;
  b.add(*seq, std::vector<int32_t>(size_t(T), 0));
  std::vector<float> y(size_t(T * hidden));
  harness.forward(x, b, y.data());
  LayerTrace trace;
  harness.trace(x, b, trace);
  return trace;
}

}  // namespace attnzoo::testing
