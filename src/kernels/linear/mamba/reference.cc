// The selective scan written out plainly, in double precision: the definition the fast path is tested against.
#include <cmath>
#include <vector>

#include "kernels/linear/mamba/problem.h"

namespace attnzoo {
namespace {

void run_reference(const SelectiveScanProblem& p) {
  const int64_t D = p.D, N = p.N, cpg = p.channels_per_group();
  std::vector<double> h(static_cast<size_t>(N));
  for (int64_t s = 0; s < p.seqs.count(); ++s) {
    const int64_t b = p.batch_of(s);
    for (int64_t d = 0; d < D; ++d) {
      const int64_t g = d / cpg, state_base = (s * D + d) * N;
      for (int64_t n = 0; n < N; ++n) h[size_t(n)] = p.h0 ? p.h0[state_base + n] : 0.0;
      for (int64_t i = 0; i < p.seqs.length[size_t(s)]; ++i) {
        const int64_t t = p.seqs.begin[size_t(s)] + i, ci = p.channel_index(b, d, t);
        const double u = load_as_f32(p.u, p.u_dtype, ci);
        double dt = double(load_as_f32(p.delta, p.delta_dtype, ci));
        if (!p.bias.empty()) dt += p.bias[size_t(d)];
        if (p.softplus) dt = ssm::softplus(dt);
        double y = 0;
        for (int64_t n = 0; n < N; ++n) {
          const int64_t si = p.state_index(b, g, n, t);
          h[size_t(n)] = std::exp(dt * p.A[size_t(d * N + n)]) * h[size_t(n)] +
                         dt * double(load_as_f32(p.Bm, p.b_dtype, si)) * u;
          y += h[size_t(n)] * load_as_f32(p.Cm, p.c_dtype, si);
        }
        if (!p.skip.empty()) y += double(p.skip[size_t(d)]) * u;
        if (p.z) y *= ssm::silu(double(load_as_f32(p.z, p.z_dtype, ci)));
        store_from_f32(p.out, p.out_dtype, ci, float(y));
      }
      if (p.ht)
        for (int64_t n = 0; n < N; ++n) p.ht[state_base + n] = float(h[size_t(n)]);
    }
  }
}

}  // namespace

void selective_scan_reference(const SelectiveScanArgs& args) {
  require_selective_scan_host(args, "selective_scan_reference");
  run_reference(make_selective_scan_problem(args));
}

// The state is read into a local copy before it is written, so updating it in place is safe.
void selective_state_update_reference(const SelectiveStateUpdateArgs& args) {
  require_selective_scan_host(args, "selective_state_update_reference");
  run_reference(make_selective_step_problem(args));
}

}  // namespace attnzoo
