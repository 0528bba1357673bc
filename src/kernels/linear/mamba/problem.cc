#include "kernels/linear/mamba/problem.h"

#include <string>

#include "core/error.h"
#include "kernels/linear/common/ssm_args.h"

namespace attnzoo {

void require_selective_scan_host(const SelectiveScanArgs& a, const char* entry) {
  ssm::require_host_entry({{&a.u, "u"}, {&a.delta, "delta"}, {&a.A, "A"}, {&a.B, "B"}, {&a.C, "C"}, {&a.D, "D"},
                           {&a.z, "z"}, {&a.delta_bias, "delta_bias"}, {&a.initial_state, a.initial_state_name},
                           {&a.final_state, a.final_state_name}, {&a.out, "out"}},
                          entry);
}

void require_selective_scan_host(const SelectiveStateUpdateArgs& a, const char* entry) {
  ssm::require_host_entry({{&a.state, "state"}, {&a.x, "x"}, {&a.dt, "dt"}, {&a.A, "A"}, {&a.B, "B"}, {&a.C, "C"},
                           {&a.D, "D"}, {&a.z, "z"}, {&a.dt_bias, "dt_bias"}, {&a.y, "y"}},
                          entry);
}

SelectiveScanProblem make_selective_scan_problem(const SelectiveScanArgs& a) {
  SelectiveScanProblem p;
  require(!a.u.empty(), "u", "is required");
  ssm::require_same_device({{&a.u, "u"}, {&a.delta, "delta"}, {&a.A, "A"}, {&a.B, "B"}, {&a.C, "C"}, {&a.D, "D"},
                            {&a.z, "z"}, {&a.delta_bias, "delta_bias"}, {&a.initial_state, a.initial_state_name},
                            {&a.final_state, a.final_state_name}, {&a.out, "out"}});
  p.device = a.u.device;
  const auto any = ssm::Where::any_device;
  ssm::require_float_rank(a.u, "u", 3, any);
  p.batch = a.u.shape[0], p.D = a.u.shape[1], p.L = a.u.shape[2];
  ssm::require_float_rank(a.A, "A", 2, any);
  p.N = a.A.shape[1];
  require(p.D >= 1, "u", "needs at least one channel, got " + a.u.shape_str());
  ssm::require_float_tensor(a.A, "A", {p.D, p.N}, any);
  require(a.B.ndim == 3 || a.B.ndim == 4, "B", "expected [batch, N, L] or [batch, groups, N, L], got " + a.B.shape_str());
  p.G = a.B.ndim == 4 ? a.B.shape[1] : 1;
  require(p.G >= 1 && p.D % p.G == 0, "B", "group count " + std::to_string(p.G) + " must divide the channel count " +
                                                std::to_string(p.D));
  if (a.B.ndim == 4) {
    ssm::require_float_tensor(a.B, "B", {p.batch, p.G, p.N, p.L}, any);
    ssm::require_float_tensor(a.C, "C", {p.batch, p.G, p.N, p.L}, any);
  } else {
    ssm::require_float_tensor(a.B, "B", {p.batch, p.N, p.L}, any);
    ssm::require_float_tensor(a.C, "C", {p.batch, p.N, p.L}, any);
  }
  ssm::require_float_tensor(a.delta, "delta", {p.batch, p.D, p.L}, any);
  ssm::require_float_tensor(a.out, "out", {p.batch, p.D, p.L}, any);
  if (!a.z.empty()) ssm::require_float_tensor(a.z, "z", {p.batch, p.D, p.L}, any);
  if (!a.D.empty()) ssm::require_float_tensor(a.D, "D", {p.D}, any);
  if (!a.delta_bias.empty()) ssm::require_float_tensor(a.delta_bias, "delta_bias", {p.D}, any);
  p.packed = a.cu_seqlens != nullptr;
  p.seqs = make_sequence_spans(p.batch, p.L, a.cu_seqlens, a.cu_seqlens_len);
  if (!p.packed)  // spans index positions along L, per batch row
    for (auto& b : p.seqs.begin) b = 0;
  const int64_t nseq = p.seqs.count();
  p.state_stride = p.D * p.N;  // dense states; pool rows set their own
  if (a.state_batch_indices) {
    const ssm::PoolStates pool = ssm::require_pool_states(a.initial_state, a.final_state, "state_batch_indices",
                                                          p.device, {{p.D, "D"}, {p.N, "N"}});
    p.h0 = p.ht = pool.base;
    p.state_indices = a.state_batch_indices;
    p.state_stride = pool.row_stride;
  } else {
    if (!a.initial_state.empty()) {
      ssm::require_f32_tensor(a.initial_state, a.initial_state_name, {nseq, p.D, p.N}, any);
      p.h0 = a.initial_state.ptr<float>();
    }
    if (!a.final_state.empty()) {
      ssm::require_f32_tensor(a.final_state, a.final_state_name, {nseq, p.D, p.N}, any);
      p.ht = a.final_state.ptr<float>();
    }
  }
  p.softplus = a.delta_softplus;
  p.A_in = a.A, p.skip_in = a.D, p.bias_in = a.delta_bias;
  if (p.device.is_cpu()) {  // the device path reads A, D and delta_bias there
    p.A = ssm::to_f32_vector(a.A);
    if (!a.D.empty()) p.skip = ssm::to_f32_vector(a.D);
    if (!a.delta_bias.empty()) p.bias = ssm::to_f32_vector(a.delta_bias);
  }
  p.u = a.u.data, p.u_dtype = a.u.dtype;
  p.delta = a.delta.data, p.delta_dtype = a.delta.dtype;
  p.Bm = a.B.data, p.b_dtype = a.B.dtype;
  p.Cm = a.C.data, p.c_dtype = a.C.dtype;
  if (!a.z.empty()) p.z = a.z.data, p.z_dtype = a.z.dtype;
  p.out = a.out.data, p.out_dtype = a.out.dtype;
  return p;
}

SelectiveScanProblem make_selective_step_problem(const SelectiveStateUpdateArgs& a) {
  // [Bn, D] -> [Bn, D, 1] and [Bn, (G,) N] -> [Bn, (G,) N, 1]: a scan of length 1 with h0 == ht == state.
  auto add_len = [](TensorView v) {
    if (v.empty()) return v;
    v.shape[size_t(v.ndim)] = 1;
    v.strides[size_t(v.ndim)] = 1;
    ++v.ndim;
    return v;
  };
  require(!a.state.empty(), "state", "is required");
  ssm::require_same_device({{&a.state, "state"}, {&a.x, "x"}, {&a.dt, "dt"}, {&a.A, "A"}, {&a.B, "B"}, {&a.C, "C"},
                            {&a.D, "D"}, {&a.z, "z"}, {&a.dt_bias, "dt_bias"}, {&a.y, "y"}});
  require(a.x.ndim == 2, "x", "expected [batch, channels], got " + a.x.shape_str());
  require(a.x.shape[1] >= 1, "x", "needs at least one channel, got " + a.x.shape_str());
  require(a.dt.ndim == 2, "dt", "expected [batch, channels], got " + a.dt.shape_str());
  require(a.y.ndim == 2, "y", "expected [batch, channels], got " + a.y.shape_str());
  require(a.z.empty() || a.z.ndim == 2, "z", "expected [batch, channels], got " + a.z.shape_str());
  require(a.B.ndim == 2 || a.B.ndim == 3, "B", "expected [batch, N] or [batch, groups, N], got " + a.B.shape_str());
  SelectiveScanArgs s;
  s.u = add_len(a.x), s.delta = add_len(a.dt), s.A = a.A, s.B = add_len(a.B), s.C = add_len(a.C);
  s.D = a.D, s.z = add_len(a.z), s.delta_bias = a.dt_bias, s.delta_softplus = a.dt_softplus;
  s.initial_state = a.state, s.final_state = a.state, s.out = add_len(a.y);
  s.initial_state_name = s.final_state_name = "state";
  if (!a.state_batch_indices) return make_selective_scan_problem(s);
  // Pool rows: checked here, then a dense [Bn, D, N] view of the same address stands in for the scan's checks (a
  // device problem's states are never read on the host).
  const int64_t D = a.x.shape[1];
  const ssm::PoolStates pool = ssm::require_pool_states(a.state, a.state, "state_batch_indices", a.x.device,
                                                        {{D, "D"}, {-1, "N"}}, "state", "state");
  TensorView dense = TensorView::contiguous(pool.base, DType::f32, {a.x.shape[0], D, a.state.shape[2]});
  dense.device = a.state.device;
  s.initial_state = s.final_state = dense;
  SelectiveScanProblem p = make_selective_scan_problem(s);
  p.state_indices = a.state_batch_indices;
  p.state_stride = pool.row_stride;
  return p;
}

}  // namespace attnzoo
