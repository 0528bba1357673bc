// The delta-family recurrence as written on paper, in double precision, one token at a time. Every fast path is
// tested against this; it favours being obviously right over being fast.
#include <cmath>
#include <vector>

#include "core/threads.h"
#include "kernels/linear/common/delta_problem.h"

namespace attnzoo {
namespace {

// Loads one head vector as doubles, optionally L2-normalised the way fla does it (eps inside the root).
std::vector<double> load_vector(const TensorView& t, int64_t offset, int64_t n, bool l2norm) {
  std::vector<double> x(static_cast<size_t>(n));
  double sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[size_t(i)] = load_as_f32(t.data, t.dtype, offset + i);
    sq += x[size_t(i)] * x[size_t(i)];
  }
  if (l2norm)
    for (double& e : x) e /= std::sqrt(sq + 1e-6);
  return x;
}

void reference_head(const DeltaProblem& p, int64_t seq, int64_t hv) {
  const int64_t K = p.K, V = p.V, h = hv / p.group();
  std::vector<double> S(size_t(K * V), 0.0);  // S[d * V + e]
  if (p.initial_state)
    for (int64_t i = 0; i < K * V; ++i) S[size_t(i)] = p.initial_state[p.state_offset(seq, hv) + i];
  std::vector<double> decay(static_cast<size_t>(K), 1.0), u(static_cast<size_t>(V));
  for (int64_t t = 0; t < p.seqs.length[size_t(seq)]; ++t) {
    const int64_t row = p.seqs.begin[size_t(seq)] + t;
    const std::vector<double> q = load_vector(p.q, p.qk_offset(row, h), K, p.l2norm);
    const std::vector<double> k = load_vector(p.k, p.qk_offset(row, h), K, p.l2norm);
    const std::vector<double> v = load_vector(p.v, p.v_offset(row, hv), V, false);
    const double beta = p.beta.empty() ? 1.0 : load_as_f32(p.beta.data, p.beta.dtype, row * p.HV + hv);
    if (p.gate != DeltaGate::none) {
      const bool per_channel = p.gate == DeltaGate::channel;
      for (int64_t d = 0; d < K; ++d)
        decay[size_t(d)] = std::exp(double(load_as_f32(p.g.data, p.g.dtype, p.gate_offset(row, hv) + (per_channel ? d : 0))));
    }
    // S <- D S, then u = beta (v - S^T k), S <- S + k u^T, o = S^T (scale q).
    for (int64_t d = 0; d < K; ++d)
      for (int64_t e = 0; e < V; ++e) S[size_t(d * V + e)] *= decay[size_t(d)];
    for (int64_t e = 0; e < V; ++e) {
      double pred = 0;
      for (int64_t d = 0; d < K; ++d) pred += S[size_t(d * V + e)] * k[size_t(d)];
      u[size_t(e)] = beta * (v[size_t(e)] - pred);
    }
    for (int64_t d = 0; d < K; ++d)
      for (int64_t e = 0; e < V; ++e) S[size_t(d * V + e)] += k[size_t(d)] * u[size_t(e)];
    for (int64_t e = 0; e < V; ++e) {
      double o = 0;
      for (int64_t d = 0; d < K; ++d) o += S[size_t(d * V + e)] * q[size_t(d)];
      store_from_f32(p.o.data, p.o.dtype, p.v_offset(row, hv) + e, float(o * p.scale));
    }
  }
  if (p.final_state)
    for (int64_t i = 0; i < K * V; ++i) p.final_state[p.state_offset(seq, hv) + i] = float(S[size_t(i)]);
}

}  // namespace

void delta_reference(const DeltaProblem& p) {
  ThreadPool::global().parallel_for(p.seqs.count() * p.HV,
                                    [&](int64_t task, int) { reference_head(p, task / p.HV, task % p.HV); });
}

}  // namespace attnzoo
