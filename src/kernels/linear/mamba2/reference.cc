// The Mamba-2 recurrence written out plainly, in double precision: the definition the fast paths are tested
// against.
#include <cmath>
#include <vector>

#include "kernels/linear/common/ssm_args.h"
#include "kernels/linear/mamba2/problem.h"

namespace attnzoo {

namespace {

void run_reference(const Mamba2Problem& p) {
  const int64_t H = p.H, P = p.P, N = p.N, G = p.G, hpg = p.heads_per_group();
  std::vector<double> h(size_t(P * N));
  for (int64_t s = 0; s < p.seqs.count(); ++s) {
    for (int64_t head = 0; head < H; ++head) {
      const int64_t g = head / hpg;
      const int64_t state_base = (s * H + head) * P * N;
      for (int64_t i = 0; i < P * N; ++i) h[size_t(i)] = p.h0 ? p.h0[state_base + i] : 0.0;
      for (int64_t t = 0; t < p.seqs.length[size_t(s)]; ++t) {
        const int64_t row = p.seqs.begin[size_t(s)] + t;  // token index into [B*T]
        const double dt = p.dt[size_t(row * H + head)];
        const double decay = std::exp(double(p.A[size_t(head)]) * dt);
        for (int64_t i = 0; i < P; ++i) {
          const int64_t xi = (row * H + head) * P + i;
          const double x = load_as_f32(p.x, p.x_dtype, xi);
          double y = 0;
          for (int64_t n = 0; n < N; ++n) {
            const int64_t bi = (row * G + g) * N + n;
            double& hv = h[size_t(i * N + n)];
            hv = decay * hv + dt * x * load_as_f32(p.Bm, p.b_dtype, bi);
            y += hv * load_as_f32(p.Cm, p.c_dtype, bi);
          }
          if (!p.D.empty()) y += double(p.D[size_t(head * P + i)]) * x;
          if (p.z) y *= ssm::silu(double(load_as_f32(p.z, p.z_dtype, xi)));
          store_from_f32(p.y, p.y_dtype, xi, float(y));
        }
      }
      if (p.ht)
        for (int64_t i = 0; i < P * N; ++i) p.ht[state_base + i] = float(h[size_t(i)]);
    }
  }
}

}  // namespace

void mamba2_reference(const Mamba2Args& args) {
  require_mamba2_host(args, "mamba2_reference");
  run_reference(make_mamba2_problem(args));
}

// The state is read into a local copy before it is written, so updating it in place is safe.
void mamba2_state_update_reference(const Mamba2StepArgs& args) {
  require_mamba2_host(args, "mamba2_state_update_reference");
  run_reference(make_mamba2_step_problem(args));
}

}  // namespace attnzoo
