#pragma once
// Simple GLA: a scalar, data-dependent log decay per (token, value head) — fla.ops.simple_gla.
//   S_t = exp(g_t + g_gamma) S_{t-1} + k_t^T v_t ,   o_t = scale * q_t S_t
// q, k [B, T, H, K]; v [B, T, HV, V] (HV a multiple of H); g [B, T, HV] (may be empty); g_gamma [HV] f32
// constant log decay (may be empty); o [B, T, HV, V]. Inputs f32 / bf16 / f16; states [N, HV, K, V] f32.
#include "kernels/linear/common/gla_problem.h"

namespace attnzoo {

void chunk_simple_gla(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& g,
                      const TensorView& g_gamma, const TensorView& o, const GlaOptions& opts);
void recurrent_simple_gla(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& g,
                          const TensorView& g_gamma, const TensorView& o, const GlaOptions& opts);
void simple_gla_reference(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& g,
                          const TensorView& g_gamma, const TensorView& o, const GlaOptions& opts);

}  // namespace attnzoo
