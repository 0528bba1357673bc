#pragma once
// The GPU sampler's host side, plain C++ (every build; the kernel emulator runs the same plan): each row's
// settings resolved from its Sampler as Sampler::sample resolves them, and the kernel's per-row refusals turned
// into the CPU sampler's errors.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/cuda/sample_params.h"
#include "engine/sampler.h"

namespace attnzoo::cuda_sample {

struct SamplePlan {
  std::vector<RowSettings> rows;
  std::vector<PenaltyEntry> penalties;  // every row's, row after row
};

// One row per sampler, reading logits row logit_rows[i] (empty: row i). Context ids are checked as the CPU checks
// them (ArgumentError naming context_ids and the row); penalties are grouped per distinct id only where one is
// on; top_k >= vocab is off. Each non-greedy sampler's generator gives the row its one draw, as Sampler::sample
// would take it.
SamplePlan plan_samples(int64_t vocab, std::span<Sampler* const> samplers,
                        std::span<const std::span<const int32_t>> contexts,
                        std::span<const int64_t> logit_rows = {});

// The message of the ArgumentError Sampler::sample throws for a row the kernel refused (RowStatus; empty for
// kRowOk); DeviceError, naming `row`, for a status the kernel never writes.
std::string row_status_message(int32_t status, int64_t row);
// That error thrown, naming the row.
void raise_row_status(int32_t status, int64_t row);

}  // namespace attnzoo::cuda_sample
