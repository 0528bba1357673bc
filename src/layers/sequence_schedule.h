#pragma once
// Pieces every stateful mixer (Gated DeltaNet, KDA, Mamba-2, MLA) needs the same way, written once.
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "layers/batch.h"

namespace attnzoo {

// Runs fn(s) for every sequence of the batch. When every sequence brings at most `decode_tokens` tokens (a
// decode step) and there are several, each sequence is one task on the pool and the kernels run serially inside
// it; otherwise sequences go one at a time and each kernel spreads its own work over the pool.
void for_each_sequence(const Batch& batch, int64_t decode_tokens, const std::function<void(int64_t)>& fn);

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
