#pragma once
// RetNet retention (Sun et al. 2023): simple GLA with a constant decay per value head,
// gamma_h = 1 - 2^(-5 - h) (fla.ops.retention), in three equivalent forms:
//   parallel   O = (Q K^T * D) V, D[i, j] = gamma^(i - j) for j <= i    quadratic, no state
//   recurrent  S_t = gamma S_{t-1} + k_t^T v_t, o_t = scale * q_t S_t    decode
//   chunk      chunkwise-parallel (the simple GLA kernel with g = log gamma)
// q, k [B, T, H, K]; v [B, T, HV, V]; o [B, T, HV, V]; states [N, HV, K, V] f32.
#include <optional>
#include <vector>

#include "kernels/linear/common/gla_problem.h"

namespace attnzoo {

// log gamma_h for h in [0, HV): RetNet's multi-scale decays.
std::vector<float> retention_log_decays(int64_t num_heads);

void chunk_retention(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
                     const GlaOptions& opts);
void recurrent_retention(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
                         const GlaOptions& opts);
void retention_reference(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
                         const GlaOptions& opts);
// No state in or out: opts.initial_state / final_state must be empty.
void parallel_retention(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
                        const GlaOptions& opts);

}  // namespace attnzoo
