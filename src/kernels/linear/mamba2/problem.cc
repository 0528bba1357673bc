#include "kernels/linear/mamba2/problem.h"

#include <string>

#include "core/error.h"
#include "kernels/linear/common/ssm_args.h"

namespace attnzoo {

void require_mamba2_host(const Mamba2Args& a, const char* entry) {
  ssm::require_host_entry({{&a.x, "x"}, {&a.dt, "dt"}, {&a.A, "A"}, {&a.B, "B"}, {&a.C, "C"}, {&a.D, "D"},
                           {&a.z, "z"}, {&a.dt_bias, "dt_bias"}, {&a.initial_state, a.initial_state_name},
                           {&a.final_state, a.final_state_name}, {&a.y, "y"}},
                          entry, "the chunked form, like the recurrent one,");
}

void require_mamba2_host(const Mamba2StepArgs& a, const char* entry) {
  ssm::require_host_entry({{&a.state, "state"}, {&a.x, "x"}, {&a.dt, "dt"}, {&a.A, "A"}, {&a.B, "B"},
                           {&a.C, "C"}, {&a.D, "D"}, {&a.z, "z"}, {&a.dt_bias, "dt_bias"}, {&a.y, "y"}},
                          entry);
}

Mamba2Problem make_mamba2_problem(const Mamba2Args& a) {
  Mamba2Problem p;
  require(!a.x.empty(), "x", "is required");
  ssm::require_same_device({{&a.x, "x"}, {&a.dt, "dt"}, {&a.A, "A"}, {&a.B, "B"}, {&a.C, "C"}, {&a.D, "D"},
                            {&a.z, "z"}, {&a.dt_bias, "dt_bias"}, {&a.initial_state, a.initial_state_name},
                            {&a.final_state, a.final_state_name}, {&a.y, "y"}});
  p.device = a.x.device;
  const auto any = ssm::Where::any_device;
  ssm::require_float_rank(a.x, "x", 4, any);
  p.batch = a.x.shape[0], p.T = a.x.shape[1], p.H = a.x.shape[2], p.P = a.x.shape[3];
  ssm::require_float_rank(a.B, "B", 4, any);
  p.G = a.B.shape[2], p.N = a.B.shape[3];
  require(p.H >= 1 && p.P >= 1, "x", "needs at least one head and head dim >= 1, got " + a.x.shape_str());
  require(p.G >= 1 && p.N >= 1, "B", "needs at least one group and state size >= 1, got " + a.B.shape_str());
  require(p.H % p.G == 0, "B", "group count " + std::to_string(p.G) + " must divide the head count " +
                                    std::to_string(p.H));
  ssm::require_float_tensor(a.B, "B", {p.batch, p.T, p.G, p.N}, any);
  ssm::require_float_tensor(a.C, "C", {p.batch, p.T, p.G, p.N}, any);
  ssm::require_float_tensor(a.dt, "dt", {p.batch, p.T, p.H}, any);
  ssm::require_float_tensor(a.A, "A", {p.H}, any);
  ssm::require_float_tensor(a.y, "y", {p.batch, p.T, p.H, p.P}, any);
  if (!a.z.empty()) ssm::require_float_tensor(a.z, "z", {p.batch, p.T, p.H, p.P}, any);
  if (!a.D.empty()) {
    ssm::require_float_rank(a.D, "D", a.D.ndim, any);
    require((a.D.ndim == 1 && a.D.shape[0] == p.H) || (a.D.ndim == 2 && a.D.shape[0] == p.H && a.D.shape[1] == p.P),
            "D", "expected shape [" + std::to_string(p.H) + "] or [" + std::to_string(p.H) + ", " +
                     std::to_string(p.P) + "], got " + a.D.shape_str());
  }
  if (!a.dt_bias.empty()) ssm::require_float_tensor(a.dt_bias, "dt_bias", {p.H}, any);
  require(!a.dt_limit || a.dt_min <= a.dt_max, "dt_limit", "needs min <= max");
  p.seqs = make_sequence_spans(p.batch, p.T, a.cu_seqlens, a.cu_seqlens_len);
  const int64_t nseq = p.seqs.count();
  p.state_stride = p.H * p.P * p.N;  // dense states; pool rows set their own
  if (a.state_batch_indices) {
    const ssm::PoolStates pool = ssm::require_pool_states(a.initial_state, a.final_state, "state_batch_indices",
                                                          p.device, {{p.H, "H"}, {p.P, "P"}, {p.N, "N"}});
    p.h0 = p.ht = pool.base;
    p.state_indices = a.state_batch_indices;
    p.state_stride = pool.row_stride;
  } else {
    if (!a.initial_state.empty()) {
      ssm::require_f32_tensor(a.initial_state, a.initial_state_name, {nseq, p.H, p.P, p.N}, any);
      p.h0 = a.initial_state.ptr<float>();
    }
    if (!a.final_state.empty()) {
      ssm::require_f32_tensor(a.final_state, a.final_state_name, {nseq, p.H, p.P, p.N}, any);
      p.ht = a.final_state.ptr<float>();
    }
  }
  require(a.chunk_size == 16 || a.chunk_size == 32 || a.chunk_size == 64 || a.chunk_size == 128, "chunk_size",
          "must be 16, 32, 64 or 128, got " + std::to_string(a.chunk_size));
  p.chunk_size = a.chunk_size;
  p.x = a.x.data, p.x_dtype = a.x.dtype;
  p.Bm = a.B.data, p.b_dtype = a.B.dtype;
  p.Cm = a.C.data, p.c_dtype = a.C.dtype;
  if (!a.z.empty()) p.z = a.z.data, p.z_dtype = a.z.dtype;
  p.y = a.y.data, p.y_dtype = a.y.dtype;
  p.dt_in = a.dt, p.A_in = a.A, p.D_in = a.D, p.dt_bias_in = a.dt_bias;
  p.dt_softplus = a.dt_softplus, p.dt_limit = a.dt_limit, p.dt_min = a.dt_min, p.dt_max = a.dt_max;
  if (!p.device.is_cpu()) return p;  // the device path reads dt, A, D and dt_bias there

  p.A = ssm::to_f32_vector(a.A);
  if (!a.D.empty()) {
    const std::vector<float> d = ssm::to_f32_vector(a.D);
    p.D.resize(size_t(p.H * p.P));
    for (int64_t h = 0; h < p.H; ++h)
      for (int64_t i = 0; i < p.P; ++i) p.D[size_t(h * p.P + i)] = a.D.ndim == 1 ? d[size_t(h)] : d[size_t(h * p.P + i)];
  }
  const std::vector<float> bias = a.dt_bias.empty() ? std::vector<float>() : ssm::to_f32_vector(a.dt_bias);
  const ssm::StepTransform step{bias.empty() ? nullptr : bias.data(), a.dt_softplus, a.dt_min, a.dt_max, a.dt_limit};
  p.dt.resize(size_t(p.batch * p.T * p.H));
  for (int64_t i = 0; i < p.batch * p.T; ++i)
    for (int64_t h = 0; h < p.H; ++h)
      p.dt[size_t(i * p.H + h)] = step.apply(load_as_f32(a.dt.data, a.dt.dtype, i * p.H + h), h);
  return p;
}

Mamba2Problem make_mamba2_step_problem(const Mamba2StepArgs& a) {
  // Views the step as a length-1 sequence per batch row and reuses the sequence checks (after the device check,
  // which names the step's own arguments).
  require(!a.state.empty(), "state", "is required");
  ssm::require_same_device({{&a.state, "state"}, {&a.x, "x"}, {&a.dt, "dt"}, {&a.A, "A"}, {&a.B, "B"},
                            {&a.C, "C"}, {&a.D, "D"}, {&a.z, "z"}, {&a.dt_bias, "dt_bias"}, {&a.y, "y"}});
  ssm::require_float_rank(a.x, "x", 3, ssm::Where::any_device);
  ssm::require_float_rank(a.B, "B", 3, ssm::Where::any_device);
  Mamba2Args s;
  auto add_time = [](TensorView v) {  // [Bn, ...] -> [Bn, 1, ...]
    if (v.empty()) return v;
    for (int d = v.ndim; d > 1; --d) v.shape[size_t(d)] = v.shape[size_t(d - 1)], v.strides[size_t(d)] = v.strides[size_t(d - 1)];
    v.shape[1] = 1;
    v.strides[1] = v.strides[0];
    ++v.ndim;
    return v;
  };
  require(a.dt.ndim == 2, "dt", "expected 2 dims [batch, heads], got " + a.dt.shape_str());
  require(a.C.ndim == 3, "C", "expected 3 dims [batch, groups, state], got " + a.C.shape_str());
  require(a.y.ndim == 3, "y", "expected 3 dims [batch, heads, head_dim], got " + a.y.shape_str());
  require(a.z.empty() || a.z.ndim == 3, "z", "expected 3 dims [batch, heads, head_dim], got " + a.z.shape_str());
  s.x = add_time(a.x), s.dt = add_time(a.dt), s.B = add_time(a.B), s.C = add_time(a.C), s.z = add_time(a.z);
  s.y = add_time(a.y);
  s.A = a.A, s.D = a.D, s.dt_bias = a.dt_bias;
  s.dt_softplus = a.dt_softplus, s.dt_limit = a.dt_limit, s.dt_min = a.dt_min, s.dt_max = a.dt_max;
  s.initial_state = a.state;
  s.final_state = a.state;
  s.initial_state_name = s.final_state_name = "state";
  if (!a.state_batch_indices) return make_mamba2_problem(s);
  // Pool rows: checked here, then a dense [Bn, H, P, N] view of the same address stands in for the sequence
  // checks (a device problem's states are never read on the host).
  const int64_t H = a.x.shape[1], P = a.x.shape[2], N = a.B.shape[2];
  const ssm::PoolStates pool = ssm::require_pool_states(a.state, a.state, "state_batch_indices", a.x.device,
                                                        {{H, "H"}, {P, "P"}, {N, "N"}}, "state", "state");
  TensorView dense = TensorView::contiguous(pool.base, DType::f32, {a.x.shape[0], H, P, N});
  dense.device = a.state.device;
  s.initial_state = s.final_state = dense;
  Mamba2Problem p = make_mamba2_problem(s);
  p.state_indices = a.state_batch_indices;
  p.state_stride = pool.row_stride;
  return p;
}

}  // namespace attnzoo
