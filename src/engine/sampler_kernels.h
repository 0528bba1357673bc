#pragma once
// The vocabulary-wide passes of the sampler, vectorised per SIMD target (Highway, runtime dispatch).
// Every pass is a single streaming read of the logits: at 150k entries each costs tens of microseconds.
#include <cstddef>
#include <cstdint>

namespace attnzoo {

struct MaxResult {
  float max = 0.f;
  bool has_nan = false;
};

// Largest value and whether any entry is NaN (a NaN logit means the model misbehaved: refuse it).
MaxResult logits_max(const float* x, size_t n);
// Index of the first entry equal to `value` (the greedy token: ties go to the lowest id, as torch.argmax), -1 if none.
int64_t find_first_equal(const float* x, size_t n, float value);
// x[i] *= s.
void scale_in_place(float* x, size_t n, float s);
// e[i] = exp(x[i] - shift), and block_sums[b] = the sum of e over [b * kExpBlock, (b + 1) * kExpBlock) (float lanes
// within a block, double across). The sums let a draw find its block first and scan only that block.
constexpr size_t kExpBlock = 4096;
inline size_t exp_block_count(size_t n) { return (n + kExpBlock - 1) / kExpBlock; }
void exp_shifted(const float* x, float* e, size_t n, float shift, double* block_sums);
// Appends to `out` the indices i with x[i] >= threshold; returns how many it wrote. `out` holds n entries.
size_t indices_at_least(const float* x, size_t n, float threshold, int32_t* out);

}  // namespace attnzoo
