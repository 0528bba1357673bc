#include "kernels/linear/common/cuda/delta_recurrent_launch.h"

#include <utility>

#include "kernels/linear/common/cuda/delta_recurrent_cuda.h"
#include "kernels/linear/common/cuda/launch_checks.h"
#include "kernels/linear/common/cuda/recurrent_split_plan.h"

namespace attnzoo {
namespace {
using cuda_linear::require_aligned;
using namespace cuda_delta;

int64_t units(const DeltaProblem& p) { return cuda_linear::recurrent_units(p.seqs.count(), p.HV, p.V); }

}  // namespace

void check_cuda_delta_recurrent(const DeltaProblem& p) {
  cuda_linear::require_recurrent_split(p.K, units(p), "q", "sequences x value heads x ceil(V / 32)");
  for (auto [t, name] : {std::pair{&p.q, "q"}, {&p.k, "k"}, {&p.v, "v"}, {&p.g, "g"}, {&p.beta, "beta"},
                         {&p.o, "o"}})
    if (!t->empty()) require_aligned(t->data, dtype_size(t->dtype), name);
  if (p.initial_state) require_aligned(p.initial_state, sizeof(float), "initial_state");
  if (p.final_state) require_aligned(p.final_state, sizeof(float), "final_state");
}

namespace cuda_delta {

RecurrentLaunch plan_delta_recurrent(const DeltaProblem& p) {
  RecurrentLaunch l;
  const int64_t N = p.seqs.count();
  const bool writes_state = p.final_state != nullptr;
  if (N == 0 || (p.B * p.T == 0 && !writes_state)) return l;
  l.empty = false;

  // Padded batches need no metadata (sequence n is rows [n T, n T + T)); packed ones upload their offsets.
  l.seq_offsets = packed_offsets(p.seqs, p.B, p.T);

  Params& params = l.params;
  params.q = p.q.data, params.k = p.k.data, params.v = p.v.data, params.g = p.g.data, params.beta = p.beta.data;
  params.o = p.o.data;
  params.q_t = elem_of(p.q.dtype), params.k_t = elem_of(p.k.dtype), params.v_t = elem_of(p.v.dtype);
  params.g_t = elem_of(p.g.dtype), params.beta_t = elem_of(p.beta.dtype), params.o_t = elem_of(p.o.dtype);
  params.initial_state = p.initial_state;
  params.final_state = p.final_state;
  params.state_indices = p.state_indices;
  params.state_stride = p.state_stride;
  params.T = p.T;
  params.H = int(p.H), params.HV = int(p.HV), params.K = int(p.K), params.V = int(p.V);
  params.group = int(p.group());
  params.scale = p.scale;
  params.l2norm = p.l2norm;
  cuda_linear::plan_recurrent_split(l, units(p), p.K, p.V);
  return l;
}

}  // namespace cuda_delta
}  // namespace attnzoo
