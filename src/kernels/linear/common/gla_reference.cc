// The gated linear recurrence written out token by token in double precision: the yardstick for every fast
// kernel of linear attention, retention, simple GLA and GLA. Slow on purpose.
#include <cmath>
#include <vector>

#include "core/threads.h"
#include "kernels/linear/common/gla_problem.h"
#include "kernels/linear/common/gla_rows.h"

namespace attnzoo {
namespace {

void reference_task(const GlaProblem& p, int64_t n, int64_t hv) {
  const int64_t K = p.K, V = p.V, h = hv / p.group();
  const size_t Ks = static_cast<size_t>(K), Vs = static_cast<size_t>(V);
  std::vector<double> S(Ks * Vs, 0.0), z(Ks, 0.0);
  if (p.initial_state)
    for (int64_t i = 0; i < K * V; ++i) S[size_t(i)] = p.initial_state[(n * p.HV + hv) * K * V + i];
  if (p.initial_z)
    for (int64_t i = 0; i < K; ++i) z[size_t(i)] = p.initial_z[(n * p.H + h) * K + i];
  std::vector<float> q(Ks), k(Ks), gk(Ks), v(Vs + 16);
  std::vector<double> decay(Ks, 1.0), o(Vs);
  for (int64_t t = 0; t < p.seqs.length[size_t(n)]; ++t) {
    const int64_t row = p.seqs.begin[size_t(n)] + t;
    load_gla_query(p, row, h, q.data());
    load_gla_key(p, row, h, k.data());
    load_gla_value(p, row, hv, v.data(), V);
    if (p.gate == GateKind::scalar) {
      std::fill(decay.begin(), decay.end(), std::exp(double(gla_scalar_gate(p, row, hv))));
    } else if (p.gate == GateKind::channel) {
      load_gla_channel_gate(p, row, hv, gk.data());
      for (int64_t i = 0; i < K; ++i) decay[size_t(i)] = std::exp(double(gk[size_t(i)]));
    }
    // S = diag(decay) S + k^T v ;  o = q S
    std::fill(o.begin(), o.end(), 0.0);
    double den = 0.0;
    for (int64_t i = 0; i < K; ++i) {
      double* Si = S.data() + i * V;
      for (int64_t j = 0; j < V; ++j) {
        Si[j] = decay[size_t(i)] * Si[j] + double(k[size_t(i)]) * double(v[size_t(j)]);
        o[size_t(j)] += double(q[size_t(i)]) * Si[j];
      }
      z[size_t(i)] = decay[size_t(i)] * z[size_t(i)] + double(k[size_t(i)]);
      den += double(q[size_t(i)]) * z[size_t(i)];
    }
    const double inv = p.normalize ? 1.0 / (den + 1e-10) : 1.0;
    for (int64_t j = 0; j < V; ++j)
      store_from_f32(const_cast<void*>(p.o), p.o_dtype, (row * p.HV + hv) * V + j, float(o[size_t(j)] * inv));
  }
  if (p.final_state)
    for (int64_t i = 0; i < K * V; ++i) p.final_state[(n * p.HV + hv) * K * V + i] = float(S[size_t(i)]);
  if (p.normalize && p.final_z && hv % p.group() == 0)
    for (int64_t i = 0; i < K; ++i) p.final_z[(n * p.H + h) * K + i] = float(z[size_t(i)]);
}

}  // namespace

void gated_linear_reference(const GlaProblem& p) {
  ThreadPool::global().parallel_for(p.num_tasks(), [&](int64_t task, int) {
    reference_task(p, task / p.HV, task % p.HV);
  });
}

}  // namespace attnzoo
