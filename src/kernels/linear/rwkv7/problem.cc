#include "kernels/linear/rwkv7/problem.h"

#include <cmath>
#include <string>

#include "core/error.h"
#include "kernels/linear/common/ssm_args.h"

namespace attnzoo {
namespace {

void require_pool_states(const Rwkv7Args& a, Rwkv7Problem& p) {
  const ssm::PoolStates pool = ssm::require_pool_states(a.initial_state, a.final_state, "ssm_state_indices",
                                                        p.device, {{p.H, "H"}, {p.K, "K"}, {p.V, "V"}});
  p.h0 = pool.base;
  p.ht = pool.base;
  p.state_indices = a.ssm_state_indices;
  p.state_stride = pool.row_stride;
}

}  // namespace

void require_rwkv7_host(const Rwkv7Args& a, const char* entry) {
  ssm::require_host_entry({{&a.r, "r"}, {&a.w, "w"}, {&a.k, "k"}, {&a.v, "v"}, {&a.a, "a"}, {&a.b, "b"},
                           {&a.initial_state, "initial_state"}, {&a.final_state, "final_state"}, {&a.o, "o"}},
                          entry);
}

Rwkv7Problem make_rwkv7_problem(const Rwkv7Args& a) {
  Rwkv7Problem p;
  require(!a.r.empty(), "r", "is required");
  ssm::require_same_device({{&a.r, "r"}, {&a.w, "w"}, {&a.k, "k"}, {&a.v, "v"}, {&a.a, "a"}, {&a.b, "b"},
                            {&a.initial_state, "initial_state"}, {&a.final_state, "final_state"}, {&a.o, "o"}});
  p.device = a.r.device;
  const auto any = ssm::Where::any_device;
  ssm::require_float_rank(a.r, "r", 4, any);
  ssm::require_float_rank(a.v, "v", 4, any);
  p.batch = a.r.shape[0], p.T = a.r.shape[1], p.H = a.r.shape[2], p.K = a.r.shape[3], p.V = a.v.shape[3];
  require(p.H >= 1 && p.K >= 1, "r", "needs at least one head and key dim >= 1, got " + a.r.shape_str());
  require(p.V >= 1, "v", "needs value dim >= 1, got " + a.v.shape_str());
  ssm::require_float_tensor(a.w, "w", {p.batch, p.T, p.H, p.K}, any);
  ssm::require_float_tensor(a.k, "k", {p.batch, p.T, p.H, p.K}, any);
  ssm::require_float_tensor(a.a, "a", {p.batch, p.T, p.H, p.K}, any);
  ssm::require_float_tensor(a.b, "b", {p.batch, p.T, p.H, p.K}, any);
  ssm::require_float_tensor(a.v, "v", {p.batch, p.T, p.H, p.V}, any);
  ssm::require_float_tensor(a.o, "o", {p.batch, p.T, p.H, p.V}, any);
  require(std::isfinite(a.scale), "scale", "must be finite");
  p.seqs = make_sequence_spans(p.batch, p.T, a.cu_seqlens, a.cu_seqlens_len);
  p.state_stride = p.H * p.K * p.V;
  if (a.ssm_state_indices) {
    require_pool_states(a, p);
  } else if (!a.initial_state.empty()) {
    ssm::require_f32_tensor(a.initial_state, "initial_state", {p.seqs.count(), p.H, p.K, p.V}, any);
    p.h0 = a.initial_state.ptr<float>();
  }
  if (!a.final_state.empty() && !a.ssm_state_indices) {
    ssm::require_f32_tensor(a.final_state, "final_state", {p.seqs.count(), p.H, p.K, p.V}, any);
    p.ht = a.final_state.ptr<float>();
  }
  p.r = a.r.data, p.r_dtype = a.r.dtype;
  p.w = a.w.data, p.w_dtype = a.w.dtype;
  p.k = a.k.data, p.k_dtype = a.k.dtype;
  p.v = a.v.data, p.v_dtype = a.v.dtype;
  p.a = a.a.data, p.a_dtype = a.a.dtype;
  p.b = a.b.data, p.b_dtype = a.b.dtype;
  p.o = a.o.data, p.o_dtype = a.o.dtype;
  p.scale = a.scale;
  return p;
}

}  // namespace attnzoo
