#include "kernels/linear/common/cuda/gla_recurrent_launch.h"

#include <tuple>
#include <utility>

#include "core/error.h"
#include "kernels/linear/common/cuda/gla_recurrent_cuda.h"
#include "kernels/linear/common/cuda/launch_checks.h"
#include "kernels/linear/common/cuda/recurrent_split_plan.h"

namespace attnzoo {
namespace {
using cuda_linear::require_aligned;
using namespace cuda_gla;

int64_t units(const GlaProblem& p) { return cuda_linear::recurrent_units(p.seqs.count(), p.HV, p.V); }

}  // namespace

void check_cuda_gla_recurrent(const GlaProblem& p) {
  cuda_linear::require_recurrent_split(p.K, units(p), "q", "sequences x value heads x ceil(V / 32)");
  for (auto [data, dtype, name] : {std::tuple{p.q, p.q_dtype, "q"}, {p.k, p.k_dtype, "k"}, {p.v, p.v_dtype, "v"},
                                   {p.g, p.g_dtype, "g"}, {static_cast<const void*>(p.o), p.o_dtype, "o"}})
    if (data) require_aligned(data, dtype_size(dtype), name);
  for (auto [data, name] : {std::pair{static_cast<const void*>(p.initial_state), "initial_state"},
                            {p.final_state, "final_state"}, {p.initial_z, "initial_z"}, {p.final_z, "final_z"}})
    if (data) require_aligned(data, sizeof(float), name);
  if (p.g_gamma && !p.g_gamma_device.is_cpu()) require_aligned(p.g_gamma, sizeof(float), "g_gamma");
  require(!p.final_z || p.final_z != p.initial_z, "final_z",
          "must not be initial_z on CUDA: every thread block of a key head reads initial_z, one writes final_z");
}

namespace cuda_gla {

RecurrentLaunch plan_gla_recurrent(const GlaProblem& p) {
  RecurrentLaunch l;
  const int64_t N = p.seqs.count();
  const bool writes_state = p.final_state != nullptr || p.final_z != nullptr;
  if (N == 0 || (p.B * p.T == 0 && !writes_state)) return l;
  l.empty = false;
  l.gate = p.gate;

  // Padded batches need no metadata (sequence n is rows [n T, n T + T)); packed ones upload their offsets.
  l.seq_offsets = packed_offsets(p.seqs, p.B, p.T);
  if (p.g_gamma && p.g_gamma_device.is_cpu()) l.gamma.assign(p.g_gamma, p.g_gamma + p.HV);

  Params& params = l.params;
  params.q = p.q, params.k = p.k, params.v = p.v, params.g = p.g, params.o = p.o;
  params.q_t = elem_of(p.q_dtype), params.k_t = elem_of(p.k_dtype), params.v_t = elem_of(p.v_dtype);
  params.g_t = elem_of(p.g_dtype), params.o_t = elem_of(p.o_dtype);
  params.g_gamma = p.g_gamma;
  params.initial_state = p.initial_state, params.final_state = p.final_state;
  params.state_indices = p.state_indices, params.state_stride = p.state_stride;
  params.initial_z = p.initial_z, params.final_z = p.final_z;
  params.T = p.T;
  params.H = int(p.H), params.HV = int(p.HV), params.K = int(p.K), params.V = int(p.V);
  params.group = int(p.group());
  params.scale = p.scale;
  params.feature_map = p.feature_map;
  params.normalize = p.normalize;
  cuda_linear::plan_recurrent_split(l, units(p), p.K, p.V);
  return l;
}

}  // namespace cuda_gla
}  // namespace attnzoo
