#include "kernels/linear/rwkv7/cuda/rwkv7_recurrent_launch.h"

#include <tuple>

#include "kernels/linear/common/cuda/launch_checks.h"
#include "kernels/linear/common/cuda/recurrent_split_plan.h"
#include "kernels/linear/rwkv7/cuda/rwkv7_recurrent_cuda.h"

namespace attnzoo {
namespace {
using cuda_linear::require_aligned;
using namespace cuda_rwkv7;

int64_t units(const Rwkv7Problem& p) { return cuda_linear::recurrent_units(p.seqs.count(), p.H, p.V); }

}  // namespace

void check_cuda_rwkv7_recurrent(const Rwkv7Problem& p) {
  cuda_linear::require_recurrent_split(p.K, units(p), "r", "sequences x heads x ceil(V / 32)");
  for (auto [data, dtype, name] : {std::tuple{p.r, p.r_dtype, "r"}, {p.w, p.w_dtype, "w"}, {p.k, p.k_dtype, "k"},
                                   {p.v, p.v_dtype, "v"}, {p.a, p.a_dtype, "a"}, {p.b, p.b_dtype, "b"},
                                   {static_cast<const void*>(p.o), p.o_dtype, "o"}})
    if (data) require_aligned(data, dtype_size(dtype), name);
  if (p.h0) require_aligned(p.h0, sizeof(float), "initial_state");
  if (p.ht) require_aligned(p.ht, sizeof(float), "final_state");
}

namespace cuda_rwkv7 {

RecurrentLaunch plan_rwkv7_recurrent(const Rwkv7Problem& p) {
  RecurrentLaunch l;
  const int64_t N = p.seqs.count();
  if (N == 0 || (p.batch * p.T == 0 && !p.ht)) return l;
  l.empty = false;

  // Padded batches need no metadata (sequence n is rows [n T, n T + T)); packed ones upload their offsets.
  l.seq_offsets = packed_offsets(p.seqs, p.batch, p.T);

  Params& params = l.params;
  params.r = p.r, params.w = p.w, params.k = p.k, params.v = p.v, params.a = p.a, params.b = p.b, params.o = p.o;
  params.r_t = elem_of(p.r_dtype), params.w_t = elem_of(p.w_dtype), params.k_t = elem_of(p.k_dtype);
  params.v_t = elem_of(p.v_dtype), params.a_t = elem_of(p.a_dtype), params.b_t = elem_of(p.b_dtype);
  params.o_t = elem_of(p.o_dtype);
  params.initial_state = p.h0, params.final_state = p.ht;
  params.state_indices = p.state_indices;
  params.state_stride = p.state_stride;
  params.T = p.T;
  params.H = int(p.H), params.K = int(p.K), params.V = int(p.V);
  params.scale = p.scale;
  cuda_linear::plan_recurrent_split(l, units(p), p.K, p.V);
  l.smem_bytes = stage_bytes(l.threads);
  return l;
}

}  // namespace cuda_rwkv7
}  // namespace attnzoo
