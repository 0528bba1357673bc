#include "kernels/linear/common/gla_problem.h"

#include <cmath>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/float_dtype.h"
#include "kernels/linear/common/ssm_args.h"

namespace attnzoo {
namespace {

void require_f32(const TensorView& t, const char* name) {
  if (t.dtype != DType::f32) throw DTypeError(std::string(name) + ": expected float32, got " + dtype_name(t.dtype));
}

void require_shape(const TensorView& t, const char* name, std::initializer_list<int64_t> shape) {
  bool ok = t.ndim == int(shape.size());
  int d = 0;
  std::string want = "[";
  for (int64_t s : shape) {
    if (ok && t.shape[size_t(d)] != s) ok = false;
    want += (d ? ", " : "") + std::to_string(s);
    ++d;
  }
  want += "]";
  require(ok, name, "expected shape " + want + ", got " + t.shape_str());
  require(t.is_contiguous(), name, "must be contiguous");
}

// Every tensor on q's device, naming the odd one: shapes, dtypes and cu_seqlens are host metadata wherever the
// data lives.
void require_device(const TensorView& t, const char* name, Device device) {
  if (!t.empty())
    require(t.device == device, name, [&] { return "lives on " + t.device.str() + ", q on " + device.str(); });
}

void require_pool_states(const GlaOptions& opts, GlaProblem& p) {
  const ssm::PoolStates pool = ssm::require_pool_states(opts.initial_state, opts.final_state, "ssm_state_indices",
                                                        p.device, {{p.HV, "HV"}, {p.K, "K"}, {p.V, "V"}});
  p.initial_state = pool.base;
  p.final_state = pool.base;
  p.state_indices = opts.ssm_state_indices;
  p.state_stride = pool.row_stride;
}

}  // namespace

void require_gla_host(const GlaProblem& p, const char* entry) {
  require(p.device.is_cpu(), "q", [&] {
    return "lives on " + p.device.str() + "; " + entry +
           " runs on the CPU only so far (the recurrent form also runs on CUDA)";
  });
}

GlaProblem make_gla_problem(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& g,
                            GateKind gate, const TensorView& g_gamma, const TensorView& o, const GlaOptions& opts) {
  require(q.ndim == 4, "q", "expected [B, T, H, K], got " + q.shape_str());
  require(v.ndim == 4, "v", "expected [B, T, HV, V], got " + v.shape_str());
  require_float_dtype(q, "q");
  require_float_dtype(k, "k");
  require_float_dtype(v, "v");
  require_float_dtype(o, "o");
  for (auto [t, name] : {std::pair{&k, "k"}, {&v, "v"}, {&g, "g"}, {&o, "o"},
                         {&opts.initial_state, "initial_state"}, {&opts.final_state, "final_state"}})
    require_device(*t, name, q.device);
  if (!g_gamma.device.is_cpu()) require_device(g_gamma, "g_gamma", q.device);  // host: see GlaProblem
  GlaProblem p;
  p.device = q.device;
  p.B = q.shape[0];
  p.T = q.shape[1];
  p.H = q.shape[2];
  p.K = q.shape[3];
  p.HV = v.shape[2];
  p.V = v.shape[3];
  require(p.H >= 1 && p.K >= 1, "q", "needs at least one head and one channel, got " + q.shape_str());
  require(p.HV >= 1 && p.V >= 1, "v", "needs at least one head and one channel, got " + v.shape_str());
  require(q.is_contiguous(), "q", "must be contiguous");
  require_shape(k, "k", {p.B, p.T, p.H, p.K});
  require(v.shape[0] == p.B && v.shape[1] == p.T, "v",
          "batch and time must match q " + q.shape_str() + ", got " + v.shape_str());
  require(v.is_contiguous(), "v", "must be contiguous");
  require(p.HV % p.H == 0, "v",
          "value heads (" + std::to_string(p.HV) + ") must be a multiple of query/key heads (" +
              std::to_string(p.H) + ")");
  require_shape(o, "o", {p.B, p.T, p.HV, p.V});

  p.q = q.data;
  p.k = k.data;
  p.v = v.data;
  p.q_dtype = q.dtype;
  p.k_dtype = k.dtype;
  p.v_dtype = v.dtype;
  p.o = o.data;
  p.o_dtype = o.dtype;
  p.seqs = make_sequence_spans(p.B, p.T, opts.cu_seqlens, opts.cu_seqlens_len);
  const int64_t N = p.seqs.count();

  if (!g.empty()) {
    require_float_dtype(g, "g");
    if (gate == GateKind::channel)
      require_shape(g, "g", {p.B, p.T, p.HV, p.K});
    else
      require_shape(g, "g", {p.B, p.T, p.HV});
    p.gate = gate;
    p.g = g.data;
    p.g_dtype = g.dtype;
  }
  if (!g_gamma.empty()) {
    require_f32(g_gamma, "g_gamma");
    require_shape(g_gamma, "g_gamma", {p.HV});
    p.g_gamma = g_gamma.ptr<float>();
    p.g_gamma_device = g_gamma.device;
    // The host cannot read a device g_gamma: its scan runs on the device before the kernel.
    p.check_values = opts.check_values && !g_gamma.device.is_cpu();
    for (int64_t h = 0; g_gamma.device.is_cpu() && h < p.HV; ++h)
      require(std::isfinite(p.g_gamma[h]) && p.g_gamma[h] <= 0.f, "g_gamma",
              "must be finite and <= 0 (a log decay), entry " + std::to_string(h) + " is " +
                  std::to_string(p.g_gamma[h]));
    if (p.gate == GateKind::none) p.gate = GateKind::scalar;
  }

  p.scale = opts.scale ? *opts.scale : float(1.0 / std::sqrt(double(p.K)));
  require(std::isfinite(p.scale), "scale", "must be finite");
  p.state_stride = p.HV * p.K * p.V;
  if (opts.ssm_state_indices) {
    require_pool_states(opts, p);
  } else if (!opts.initial_state.empty()) {
    require_f32(opts.initial_state, "initial_state");
    require_shape(opts.initial_state, "initial_state", {N, p.HV, p.K, p.V});
    p.initial_state = opts.initial_state.ptr<float>();
  }
  if (!opts.final_state.empty() && !opts.ssm_state_indices) {
    require_f32(opts.final_state, "final_state");
    require_shape(opts.final_state, "final_state", {N, p.HV, p.K, p.V});
    p.final_state = opts.final_state.ptr<float>();
  }
  require(opts.chunk_size == 16 || opts.chunk_size == 32 || opts.chunk_size == 64 || opts.chunk_size == 128,
          "chunk_size", "must be 16, 32, 64 or 128, got " + std::to_string(opts.chunk_size));
  p.chunk_size = opts.chunk_size;
  return p;
}

void set_gla_normalizer(GlaProblem& p, const TensorView& initial_z, const TensorView& final_z) {
  // z is per (sequence, key head) in its own dense tensor: a pool row for it is not addressed.
  require(!p.state_indices, "ssm_state_indices", "does not address the normaliser's z (normalize)");
  p.normalize = true;
  const int64_t N = p.seqs.count();
  require_device(initial_z, "initial_z", p.device);
  require_device(final_z, "final_z", p.device);
  if (!initial_z.empty()) {
    require_f32(initial_z, "initial_z");
    require_shape(initial_z, "initial_z", {N, 1, p.H, p.K});
    p.initial_z = initial_z.ptr<float>();
  }
  if (!final_z.empty()) {
    require_f32(final_z, "final_z");
    require_shape(final_z, "final_z", {N, 1, p.H, p.K});
    p.final_z = final_z.ptr<float>();
  }
}

void run_gla(const GlaProblem& p, GlaPath path, const char* entry) {
  require(!p.state_indices || path != GlaPath::reference, "ssm_state_indices", [&] {
    return std::string("addresses the recurrent and chunked forms' states only, not ") + entry + "'s";
  });
  if (!p.device.is_cpu() && path == GlaPath::recurrent) return gated_linear_recurrent_on_device(p);
  if (!p.device.is_cpu() && path == GlaPath::chunk) return gated_linear_chunk_on_device(p);
  require_gla_host(p, entry);
  switch (path) {
    case GlaPath::reference: return gated_linear_reference(p);
    case GlaPath::recurrent: return gated_linear_recurrent(p);
    case GlaPath::chunk:
      return p.gate == GateKind::channel ? gated_linear_chunk_channel_decay(p) : gated_linear_chunk_scalar_decay(p);
  }
}

}  // namespace attnzoo
