#include "kernels/linear/s4/problem.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/error.h"
#include "kernels/linear/common/ssm_args.h"

namespace attnzoo {

S4Discretization s4_discretization(const char* name) {
  if (!std::strcmp(name, "zoh")) return S4Discretization::zoh;
  if (!std::strcmp(name, "bilinear")) return S4Discretization::bilinear;
  if (!std::strcmp(name, "dss")) return S4Discretization::dss;
  throw ArgumentError(std::string("discretization: expected 'zoh', 'bilinear' or 'dss', got '") + name + "'");
}

namespace {

std::vector<cdouble> complex_values(const TensorView& t) {
  const std::vector<float> f = ssm::to_f32_vector(t);
  std::vector<cdouble> out(f.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) out[i] = {f[2 * i], f[2 * i + 1]};
  return out;
}

std::string complex_text(cdouble z) { return "(" + std::to_string(z.real()) + ", " + std::to_string(z.imag()) + ")"; }

}  // namespace

S4Discrete make_s4_discrete(const S4Params& p) {
  S4Discrete s;
  ssm::require_float_rank(p.dt, "dt", 1);
  s.H = p.dt.shape[0];
  ssm::require_float_rank(p.A, "A", 3);
  s.N = p.A.shape[1];
  require(s.H >= 1 && s.N >= 1, "A", "needs at least one channel and one mode, got " + p.A.shape_str());
  ssm::require_float_tensor(p.A, "A", {s.H, s.N, 2});
  ssm::require_float_tensor(p.B, "B", {s.H, s.N, 2});
  ssm::require_float_tensor(p.C, "C", {s.H, s.N, 2});
  if (!p.D.empty()) {
    ssm::require_float_tensor(p.D, "D", {s.H});
    s.skip = ssm::to_f32_vector(p.D);
  }
  const bool dss = p.discretization == S4Discretization::dss;
  require(!dss || p.dss_length >= 1, "dss_length",
          "the dss discretization needs the length its kernel is normalized over (>= 1), got " +
              std::to_string(p.dss_length));
  const std::vector<float> dt = ssm::to_f32_vector(p.dt);
  const std::vector<cdouble> A = complex_values(p.A), B = complex_values(p.B);
  s.C = complex_values(p.C);
  const size_t HN = size_t(s.H * s.N);
  s.dA.resize(HN), s.dB.resize(HN), s.log_dA.resize(HN);
  for (int64_t h = 0; h < s.H; ++h) {
    const double step = dt[size_t(h)];
    require(std::isfinite(step) && step > 0, "dt", [&] {
      return "step sizes must be positive and finite, got dt[" + std::to_string(h) + "] = " + std::to_string(step);
    });
    for (int64_t n = 0; n < s.N; ++n) {
      const size_t i = s.at(h, n);
      const cdouble a = A[i], dtA = step * a;
      // Re(A) < 0 keeps |dA| < 1 under every discretization: the state and the kernel decay.
      require(std::isfinite(a.real()) && std::isfinite(a.imag()) && a.real() < 0, "A", [&] {
        return "real parts must be negative (a stable state matrix), got A[" + std::to_string(h) + ", " +
               std::to_string(n) + "] = " + complex_text(a);
      });
      if (p.discretization == S4Discretization::bilinear) {
        s.dA[i] = cdiv(1.0 + dtA / 2.0, 1.0 - dtA / 2.0);
        s.dB[i] = cdiv(B[i] * step, 1.0 - dtA / 2.0);
        s.log_dA[i] = std::log(s.dA[i]);
        continue;
      }
      s.dA[i] = cexp(dtA);
      s.log_dA[i] = dtA;
      s.dB[i] = cdiv(cmul(B[i], s.dA[i] - 1.0), a);
      if (dss) {
        const cdouble x = cmul(cexp(dtA * double(p.dss_length)) - 1.0, a);
        s.dB[i] = cmul(cmul(B[i], s.dA[i] - 1.0), std::conj(x)) / ((std::norm(x) + 1e-7) * 2.0);
      }
    }
  }
  return s;
}

int64_t S4Problem::max_length() const {
  int64_t m = 0;
  for (int64_t len : seqs.length) m = std::max(m, len);
  return m;
}

S4Problem make_s4_problem(const S4Args& a) {
  S4Problem p;
  p.ssm = make_s4_discrete(a.params);
  const int64_t H = p.ssm.H, N = p.ssm.N;
  ssm::require_float_rank(a.u, "u", 3);
  p.batch = a.u.shape[0], p.T = a.u.shape[1];
  ssm::require_float_tensor(a.u, "u", {p.batch, p.T, H});
  ssm::require_float_tensor(a.out, "out", {p.batch, p.T, H});
  p.seqs = make_sequence_spans(p.batch, p.T, a.cu_seqlens, a.cu_seqlens_len);
  const int64_t nseq = p.seqs.count();
  if (!a.initial_state.empty()) {
    ssm::require_f32_tensor(a.initial_state, a.initial_state_name, {nseq, H, N, 2});
    p.h0 = a.initial_state.ptr<float>();
  }
  if (!a.final_state.empty()) {
    ssm::require_f32_tensor(a.final_state, a.final_state_name, {nseq, H, N, 2});
    p.ht = a.final_state.ptr<float>();
  }
  p.u = a.u.data, p.u_dtype = a.u.dtype;
  p.out = a.out.data, p.out_dtype = a.out.dtype;
  return p;
}

S4Problem make_s4_step_problem(const S4StepArgs& a) {
  auto add_time = [](TensorView v) {  // [Bn, H] -> [Bn, 1, H]
    v.shape[2] = v.shape[1], v.strides[2] = v.strides[1];
    v.shape[1] = 1, v.strides[1] = v.shape[2] * v.strides[2];
    ++v.ndim;
    return v;
  };
  require(!a.state.empty(), "state", "is required");
  require(a.u.ndim == 2, "u", "expected [batch, channels], got " + a.u.shape_str());
  require(a.y.ndim == 2, "y", "expected [batch, channels], got " + a.y.shape_str());
  S4Args s;
  s.params = a.params;
  s.u = add_time(a.u), s.out = add_time(a.y);
  s.initial_state = a.state, s.final_state = a.state;
  s.initial_state_name = s.final_state_name = "state";
  return make_s4_problem(s);
}

int64_t check_s4_kernel_out(const S4Discrete& ssm, const TensorView& K) {
  require(K.ndim == 2 && K.shape[0] == ssm.H, "K", "expected [channels, length], got " + K.shape_str());
  ssm::require_f32_tensor(K, "K", {ssm.H, K.shape[1]});
  return K.shape[1];
}

}  // namespace attnzoo
