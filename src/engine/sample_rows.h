#pragma once
// One token per row of a step's logits, wherever the logits live: the CPU's Sampler on host rows, the same
// semantics in one kernel on a GPU (engine/cuda/sample_kernel.cuh) with only the chosen ids copied back, so a
// decode step on the GPU never brings its [rows, vocab] logits to the host.
#include <cstdint>
#include <span>
#include <string>

#include "core/tensor.h"
#include "engine/sampler.h"

namespace attnzoo {

// logits: f32 [rows, vocab], each row contiguous (any row stride), on the CPU or a GPU; row r is sampled with
// samplers[r] (its settings and its generator, which gives non-greedy rows one draw each, as Sampler::sample) and
// its penalties count contexts[r]. out[r] gets the token. Greedy rows equal the CPU's exactly; a seeded draw on
// a GPU equals it except within rounding of a boundary between two tokens. Errors are the CPU sampler's
// (ArgumentError naming logits, temperature or context_ids), with the row.
void sample_rows(const TensorView& logits, std::span<Sampler* const> samplers,
                 std::span<const std::span<const int32_t>> contexts, std::span<int32_t> out);

// The engine's form: sampler i reads logits row logit_rows[i] (several samplers may read one row: the n samples
// forked from one prompt), and a row the sampler refuses (NaN, +inf, all -inf, an overflowing temperature) fails
// alone: out[i] = -1 and errors[i] the CPU sampler's message, while the other rows are sampled (errors[i] is
// cleared for them). The argument checks, and an id of contexts outside the vocabulary, still throw.
void sample_rows(const TensorView& logits, std::span<const int64_t> logit_rows, std::span<Sampler* const> samplers,
                 std::span<const std::span<const int32_t>> contexts, std::span<int32_t> out,
                 std::span<std::string> errors);

}  // namespace attnzoo
