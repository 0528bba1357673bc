#pragma once
// The exact distribution the sampler draws from, written as plainly as the math (double throughout, a full
// sort of the row): what the statistical tests compare the fast sampler against.
#include <cstdint>
#include <span>
#include <vector>

#include "engine/sampler.h"

namespace attnzoo {

// Probability of each token id after penalties, temperature, top-k, top-p and min-p (HF order). Greedy gives
// a one-hot row at the first maximum.
std::vector<double> sampling_distribution_reference(std::span<const float> logits, std::span<const int32_t> context,
                                                    const SamplingParams& params);

}  // namespace attnzoo
