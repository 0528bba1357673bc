#pragma once
// DeltaNet (Schlag et al. 2021; Yang et al. 2024): the delta rule without decay, in fla's layout:
//   S_t = S_{t-1} + beta_t k_t (v_t - S_{t-1}^T k_t)^T,   o_t = S_t^T (scale q_t)
// It is the gated delta rule with g = 0, and runs on the same kernels (gated_delta_rule/); args.g must be absent.
// The recurrent and chunked forms also run on a GPU (see gated_delta_rule.h); the reference on the CPU only.
#include "kernels/linear/common/delta_problem.h"

namespace attnzoo {

void chunk_delta_rule(const DeltaArgs& args);
void recurrent_delta_rule(const DeltaArgs& args);
void delta_rule_reference(const DeltaArgs& args);

}  // namespace attnzoo
