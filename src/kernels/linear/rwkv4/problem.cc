#include "kernels/linear/rwkv4/problem.h"

#include <cmath>

#include "core/error.h"
#include "kernels/linear/common/ssm_args.h"

namespace attnzoo {

Rwkv4Problem make_rwkv4_problem(const Rwkv4Args& a) {
  Rwkv4Problem p;
  ssm::require_float_rank(a.k, "k", 3);
  p.batch = a.k.shape[0], p.T = a.k.shape[1], p.C = a.k.shape[2];
  require(p.C >= 1, "k", "needs at least one channel, got " + a.k.shape_str());
  ssm::require_float_tensor(a.v, "v", {p.batch, p.T, p.C});
  ssm::require_float_tensor(a.w, "w", {p.C});
  ssm::require_float_tensor(a.u, "u", {p.C});
  ssm::require_float_tensor(a.out, "out", {p.batch, p.T, p.C});
  p.seqs = make_sequence_spans(p.batch, p.T, a.cu_seqlens, a.cu_seqlens_len);
  if (!a.initial_state.empty()) {
    ssm::require_f32_tensor(a.initial_state, "initial_state", {p.seqs.count(), 3, p.C});
    p.h0 = a.initial_state.ptr<float>();
  }
  if (!a.final_state.empty()) {
    ssm::require_f32_tensor(a.final_state, "final_state", {p.seqs.count(), 3, p.C});
    p.ht = a.final_state.ptr<float>();
  }
  p.decay = ssm::to_f32_vector(a.w);
  for (float& x : p.decay) x = -std::exp(x);
  p.bonus = ssm::to_f32_vector(a.u);
  p.k = a.k.data, p.k_dtype = a.k.dtype;
  p.v = a.v.data, p.v_dtype = a.v.dtype;
  p.out = a.out.data, p.out_dtype = a.out.dtype;
  return p;
}

}  // namespace attnzoo
