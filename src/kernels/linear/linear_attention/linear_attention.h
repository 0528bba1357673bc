#pragma once
// Linear attention (Katharopoulos et al. 2020), fla.ops.linear_attn, with the feature map applied in-kernel:
//   S_t = S_{t-1} + phi(k_t)^T v_t ,  o_t = scale * phi(q_t) S_t
// and, with normalize, o_t /= scale * phi(q_t) . z_t + 1e-10 where z_t = z_{t-1} + phi(k_t) (fla's
// definition, epsilon included). phi: identity, relu, or elu(x) + 1.
// q, k [B, T, H, K]; v [B, T, HV, V]; o [B, T, HV, V]; state [N, HV, K, V] f32; z [N, 1, H, K] f32.
#include "kernels/linear/common/gla_problem.h"

namespace attnzoo {

struct LinearAttentionOptions : GlaOptions {
  FeatureMap feature_map = FeatureMap::identity;
  bool normalize = true;
  TensorView initial_z;  // [N, 1, H, K] running key sum entering the call (normalize only; may be empty)
  TensorView final_z;    // [N, 1, H, K] written when not empty (normalize only)
};

void chunk_linear_attn(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
                       const LinearAttentionOptions& opts);
void recurrent_linear_attn(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
                           const LinearAttentionOptions& opts);
void linear_attn_reference(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
                           const LinearAttentionOptions& opts);

}  // namespace attnzoo
