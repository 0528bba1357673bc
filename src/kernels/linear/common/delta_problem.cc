#include "kernels/linear/common/delta_problem.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "core/convert.h"
#include "core/error.h"
#include "core/float_dtype.h"
#include "kernels/linear/common/ssm_args.h"

namespace attnzoo {
namespace {

std::string str(int64_t x) { return std::to_string(x); }

void require_float(const TensorView& t, const char* name) {
  require_float_dtype(t, name);
  require(t.is_contiguous(), name, "must be contiguous");
}

void require_shape(const TensorView& t, const char* name, std::initializer_list<int64_t> want, const char* what) {
  bool ok = t.ndim == int(want.size());
  int d = 0;
  for (int64_t w : want) ok = ok && t.shape[size_t(d++)] == w;
  require(ok, name, std::string("expected shape ") + what + ", got " + t.shape_str());
}

// Refuses NaN / Inf (and, for log-decay gates, positive values: they would make the state grow without bound).
// Converts blocks to f32 and tests them branch-free so the scan runs at memory speed.
void require_finite(const TensorView& t, const char* name, bool log_decay) {
  constexpr int64_t kBlock = 2048;
  float buf[kBlock];
  const int64_t n = t.numel();
  const auto* base = static_cast<const char*>(t.data);
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = std::min(kBlock, n - b);
    convert_to_f32(base + b * int64_t(dtype_size(t.dtype)), t.dtype, buf, size_t(m));
    bool ok = true;
    for (int64_t i = 0; i < m; ++i) ok &= (buf[i] - buf[i] == 0.f) & (!log_decay | (buf[i] <= 0.f));
    if (ok) continue;
    for (int64_t i = 0; i < m; ++i) {
      require(buf[i] - buf[i] == 0.f, name, "contains NaN or Inf (flat index " + str(b + i) + ")");
      require(!log_decay || buf[i] <= 0.f, name,
              "log decays must be <= 0, found " + std::to_string(buf[i]) + " at flat index " + str(b + i));
    }
  }
}

void require_state(const TensorView& s, const char* name, int64_t N, int64_t HV, int64_t K, int64_t V) {
  if (s.dtype != DType::f32) throw DTypeError(std::string(name) + ": expected float32, got " + dtype_name(s.dtype));
  require_shape(s, name, {N, HV, K, V}, "[N, HV, K, V]");
  require(s.is_contiguous(), name, "must be contiguous");
}

// ssm_state_indices: the shared pool check, with the value scans off.
void require_pool_states(const DeltaArgs& a, DeltaProblem& p) {
  const ssm::PoolStates pool = ssm::require_pool_states(a.initial_state, a.final_state, "ssm_state_indices",
                                                        p.device, {{p.HV, "HV"}, {p.K, "K"}, {p.V, "V"}});
  require(!a.check_values, "ssm_state_indices", "needs check_values = false (the value scans read dense states)");
  p.initial_state = pool.base;
  p.final_state = pool.base;
  p.state_indices = a.ssm_state_indices;
  p.state_stride = pool.row_stride;
}

// The delta family runs on any device with every tensor on q's: shapes, dtypes and cu_seqlens are host metadata
// wherever the data lives.
void require_same_device(const DeltaArgs& a) {
  for (auto [t, name] : {std::pair{&a.k, "k"}, {&a.v, "v"}, {&a.g, "g"}, {&a.beta, "beta"}, {&a.o, "o"},
                         {&a.initial_state, "initial_state"}, {&a.final_state, "final_state"}})
    if (!t->empty())
      require(t->device == a.q.device, name,
              [&] { return "lives on " + t->device.str() + ", q on " + a.q.device.str(); });
}

}  // namespace

void require_delta_host(const DeltaArgs& a, const char* entry) {
  for (auto [t, name] : {std::pair{&a.q, "q"}, {&a.k, "k"}, {&a.v, "v"}, {&a.g, "g"}, {&a.beta, "beta"},
                         {&a.o, "o"}, {&a.initial_state, "initial_state"}, {&a.final_state, "final_state"}})
    if (!t->empty())
      require(t->device.is_cpu(), name, [&] {
        return "lives on " + t->device.str() + "; " + entry +
               " runs on the CPU only so far (the recurrent and chunked forms also run on CUDA)";
      });
}

DeltaProblem make_delta_problem(const DeltaArgs& a, DeltaGate gate) {
  DeltaProblem p;
  p.gate = gate;
  require(!a.q.empty() && a.q.ndim == 4, "q", "expected [B, T, H, K], got " + a.q.shape_str());
  require_same_device(a);
  p.device = a.q.device;
  // The host cannot read device memory: a device problem's value scans run on its device before the kernel
  // (see DeltaProblem::check_values).
  const bool scan_here = a.check_values && p.device.is_cpu();
  p.check_values = a.check_values && !scan_here;
  require_float(a.q, "q");
  p.B = a.q.shape[0];
  p.T = a.q.shape[1];
  p.H = a.q.shape[2];
  p.K = a.q.shape[3];
  require(p.H >= 1 && p.K >= 1, "q", "needs at least one head and K >= 1, got " + a.q.shape_str());
  require(!a.k.empty(), "k", "is required");
  require_float(a.k, "k");
  require_shape(a.k, "k", {p.B, p.T, p.H, p.K}, "[B, T, H, K] equal to q's");
  require(!a.v.empty() && a.v.ndim == 4, "v", "expected [B, T, HV, V], got " + a.v.shape_str());
  require_float(a.v, "v");
  p.HV = a.v.shape[2];
  p.V = a.v.shape[3];
  require(a.v.shape[0] == p.B && a.v.shape[1] == p.T, "v", "batch and length must match q's, got " + a.v.shape_str());
  require(p.HV >= 1 && p.V >= 1, "v", "needs at least one head and V >= 1, got " + a.v.shape_str());
  require(p.HV % p.H == 0, "v",
          "value heads HV=" + str(p.HV) + " must be a multiple of the key heads H=" + str(p.H));

  switch (gate) {
    case DeltaGate::none:
      require(a.g.empty(), "g", "this form has no decay gate");
      break;
    case DeltaGate::head:
      require(!a.g.empty(), "g", "is required");
      require_float(a.g, "g");
      require_shape(a.g, "g", {p.B, p.T, p.HV}, "[B, T, HV]");
      break;
    case DeltaGate::channel:
      require(!a.g.empty(), "g", "is required");
      require_float(a.g, "g");
      require_shape(a.g, "g", {p.B, p.T, p.HV, p.K}, "[B, T, HV, K]");
      break;
  }
  if (!a.beta.empty()) {
    require_float(a.beta, "beta");
    require_shape(a.beta, "beta", {p.B, p.T, p.HV}, "[B, T, HV]");
  }
  if (scan_here) {
    require_finite(a.q, "q", false);
    require_finite(a.k, "k", false);
    require_finite(a.v, "v", false);
    if (!a.g.empty()) require_finite(a.g, "g", true);
    if (!a.beta.empty()) require_finite(a.beta, "beta", false);
  }
  require(!a.o.empty(), "o", "is required");
  require_float(a.o, "o");
  require_shape(a.o, "o", {p.B, p.T, p.HV, p.V}, "[B, T, HV, V]");

  p.seqs = make_sequence_spans(p.B, p.T, a.cu_seqlens, a.cu_seqlens_len);
  const int64_t N = p.seqs.count();
  p.state_stride = p.HV * p.K * p.V;
  if (a.ssm_state_indices) {
    require_pool_states(a, p);
  } else if (!a.initial_state.empty()) {
    require_state(a.initial_state, "initial_state", N, p.HV, p.K, p.V);
    if (scan_here) require_finite(a.initial_state, "initial_state", false);
    p.initial_state = a.initial_state.ptr<const float>();
  }
  if (!a.final_state.empty() && !a.ssm_state_indices) {
    require_state(a.final_state, "final_state", N, p.HV, p.K, p.V);
    p.final_state = a.final_state.ptr<float>();
  }
  p.scale = a.scale ? *a.scale : float(1.0 / std::sqrt(double(p.K)));
  require(std::isfinite(p.scale), "scale", "must be finite");
  p.l2norm = a.use_qk_l2norm_in_kernel;
  p.chunk_size = a.chunk_size;
  require(a.chunk_size == 16 || a.chunk_size == 32 || a.chunk_size == 64 || a.chunk_size == 128, "chunk_size",
          "must be 16, 32, 64 or 128, got " + str(a.chunk_size));
  p.q = a.q;
  p.k = a.k;
  p.v = a.v;
  p.g = a.g;
  p.beta = a.beta;
  p.o = a.o;
  return p;
}

}  // namespace attnzoo
