#pragma once
// GLA (gated linear attention, Yang et al. 2023): a log decay per key channel — fla.ops.gla.
//   S_t = diag(exp(g_t)) S_{t-1} + k_t^T v_t ,   o_t = scale * q_t S_t
// q, k [B, T, H, K]; v [B, T, HV, V] (HV a multiple of H); g [B, T, HV, K]; o [B, T, HV, V].
// Inputs f32 / bf16 / f16; states [N, HV, K, V] f32. The chunked kernel is stable for decays down to at least
// -8 per step (sub-chunked scores, every exponent <= 0).
#include "kernels/linear/common/gla_problem.h"

namespace attnzoo {

void chunk_gla(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& g,
               const TensorView& o, const GlaOptions& opts);
void recurrent_gla(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& g,
                   const TensorView& o, const GlaOptions& opts);
void gla_reference(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& g,
                   const TensorView& o, const GlaOptions& opts);

}  // namespace attnzoo
