#pragma once
// Process-wide switch: batch-invariant numerics (vLLM's VLLM_BATCH_INVARIANT, the "deterministic" mode).
//
// On, the result for a token does not depend on the other tokens computed beside it: not on the other
// sequences of a batch, on how a prompt was cut into chunks, or on whether its prefix came from the prefix
// cache. Every reduction then runs in one fixed order per token: the projections over block-quantized weights
// take the 8-bit integer dots (each token's sums on their own, the order a lone decode uses) for any number of
// tokens, and softmax attention takes the tiled kernel, whose key tiles start at fixed positions, for decoding
// sequences too (the split-K decode kernel splits by the batch and the thread count). A temperature-0 answer is
// then the same under any load. Read once per call, set rarely.
namespace attnzoo {

bool batch_invariant();
void set_batch_invariant(bool on);

// Sets the mode for a scope and puts the previous one back (tests, benchmarks).
class ScopedBatchInvariant {
 public:
  explicit ScopedBatchInvariant(bool on) : saved_(batch_invariant()) { set_batch_invariant(on); }
  ~ScopedBatchInvariant() { set_batch_invariant(saved_); }
  ScopedBatchInvariant(const ScopedBatchInvariant&) = delete;
  ScopedBatchInvariant& operator=(const ScopedBatchInvariant&) = delete;

 private:
  bool saved_;
};

}  // namespace attnzoo
