#pragma once
// Pieces every stateful mixer (Gated DeltaNet, KDA, Mamba-2, MLA) needs the same way, written once.
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "layers/batch.h"
#include "state/cache_spec.h"
#include "state/layer_memory.h"

namespace attnzoo {

// Runs fn(s) for every sequence of the batch. When every sequence brings at most `decode_tokens` tokens (a
// decode step) and there are several, each sequence is one task on the pool and the kernels run serially inside
// it; otherwise sequences go one at a time and each kernel spreads its own work over the pool.
void for_each_sequence(const Batch& batch, int64_t decode_tokens, const std::function<void(int64_t)>& fn);

// The sequences of a batch that prefill (more than `decode_tokens` new tokens), as the arrays one packed varlen
// paged prefill call over the pool takes: cu_seqlens over their rows, their cache lengths and their rows of the
// layer's block tables.
struct PrefillGroup {
  std::vector<int64_t> sequences;      // batch indices, in batch order
  std::vector<int32_t> cu_seqlens{0};  // [n + 1] over the packed rows
  std::vector<int32_t> cache_seqlens;  // [n]
  std::vector<int32_t> block_tables;   // [n, max_blocks]
  bool whole_batch = false;            // every sequence prefills: packed rows == batch rows

  int64_t num_sequences() const { return int64_t(sequences.size()); }
  int64_t num_tokens() const { return cu_seqlens.back(); }
};
PrefillGroup prefill_group(const Batch& batch, int64_t decode_tokens, const BlockTables& tables);

// Runs fn(q_packed, out_packed) over the group's rows (q_row / out_row floats per token). When every sequence
// prefills (the usual prompt batch) these are the batch's own rows and nothing is copied; a mixed batch's
// prefilling rows are packed before and scattered back after.
void run_packed(const PrefillGroup& group, const Batch& batch, const float* q, int64_t q_row, float* out,
                int64_t out_row, const std::function<void(float* q_packed, float* out_packed)>& fn);

// Frobenius norm of each of `heads` consecutive blocks of `per_head` floats (the explainer's state figures).
std::vector<float> head_state_norms(const float* state, int64_t heads, int64_t per_head);

// A per-head or per-channel parameter vector (A_log, dt_bias, norm weights) of exactly n values, widened to f32;
// errors name `name` when it is missing or misshapen.
std::vector<float> widen_vector(const TensorView& t, int64_t n, const std::string& name);

// torch.nn.functional.softplus (beta 1, threshold 20), as the gates of Gated DeltaNet and KDA use it.
inline float softplus(float x) { return x > 20.f ? x : std::log1p(std::exp(x)); }

// A depthwise conv weight as [channels, 1, kernel] (HF nn.Conv1d) or [channels, kernel], viewed as the latter;
// an optional bias must be [channels]. Errors name `name`.conv1d.weight / .bias.
TensorView depthwise_conv_weight(const TensorView& weight, const TensorView& bias, int64_t channels, int64_t kernel,
                                 const std::string& name);

}  // namespace attnzoo

namespace attnzoo {

// The pool slot of a recurrent layer with a short convolution in front, as the layer reads it:
// [conv tail (conv_elems, padded to a cache line) | recurrent state (state_elems)], f32.
struct ConvStateSlot {
  float* conv;
  float* state;
};
inline int64_t conv_tail_floats(int64_t conv_elems) { return (conv_elems + 15) / 16 * 16; }
// The CacheSpec of such a layer (checked: a config whose sizes overflow is an ArgumentError naming the size).
CacheSpec conv_state_spec(int64_t conv_elems, int64_t state_elems);
// Sequence s's slot of this layer.
inline ConvStateSlot conv_state_slot(const LayerMemory& memory, const Batch& batch, int64_t s, int64_t conv_elems) {
  float* slot = memory.state(batch.state_slots[size_t(s)]);
  return {slot, slot + conv_tail_floats(conv_elems)};
}

}  // namespace attnzoo
