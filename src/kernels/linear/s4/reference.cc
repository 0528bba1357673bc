// S4D / DSS written out plainly in double precision: the recurrence, and the kernel from its definition
// K[h, l] = 2 Re(sum_n C dB dA^l) with each power taken as exp(l log dA). The fast forms are tested against these.
#include <vector>

#include "kernels/linear/s4/problem.h"

namespace attnzoo {
namespace {

void run_reference(const S4Problem& p) {
  const S4Discrete& s = p.ssm;
  const int64_t H = s.H, N = s.N;
  std::vector<cdouble> h(static_cast<size_t>(N));
  for (int64_t q = 0; q < p.seqs.count(); ++q) {
    for (int64_t c = 0; c < H; ++c) {
      const int64_t state = (q * H + c) * N;
      for (int64_t n = 0; n < N; ++n)
        h[size_t(n)] = p.h0 ? cdouble(p.h0[2 * (state + n)], p.h0[2 * (state + n) + 1]) : cdouble(0.0);
      for (int64_t i = 0; i < p.seqs.length[size_t(q)]; ++i) {
        const int64_t at = (p.seqs.begin[size_t(q)] + i) * H + c;
        const double u = load_as_f32(p.u, p.u_dtype, at);
        double y = 0;
        for (int64_t n = 0; n < N; ++n) {
          const size_t k = s.at(c, n);
          h[size_t(n)] = s.dA[k] * h[size_t(n)] + s.dB[k] * u;
          y += 2.0 * (s.C[k] * h[size_t(n)]).real();
        }
        if (!s.skip.empty()) y += double(s.skip[size_t(c)]) * u;
        store_from_f32(p.out, p.out_dtype, at, float(y));
      }
      if (p.ht)
        for (int64_t n = 0; n < N; ++n) {
          p.ht[2 * (state + n)] = float(h[size_t(n)].real());
          p.ht[2 * (state + n) + 1] = float(h[size_t(n)].imag());
        }
    }
  }
}

}  // namespace

void s4_reference(const S4Args& args) { run_reference(make_s4_problem(args)); }

// Each sequence's state is read whole before it is written, so the in-place update is safe.
void s4_step_reference(const S4StepArgs& args) { run_reference(make_s4_step_problem(args)); }

void s4_kernel_reference(const S4Params& params, const TensorView& K) {
  const S4Discrete s = make_s4_discrete(params);
  const int64_t L = check_s4_kernel_out(s, K);
  float* out = K.ptr<float>();
  for (int64_t c = 0; c < s.H; ++c)
    for (int64_t l = 0; l < L; ++l) {
      double k = 0;
      for (int64_t n = 0; n < s.N; ++n) {
        const size_t i = s.at(c, n);
        k += 2.0 * (s.C[i] * s.dB[i] * std::exp(double(l) * s.log_dA[i])).real();
      }
      out[c * L + l] = float(k);
    }
}

}  // namespace attnzoo
