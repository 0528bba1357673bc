// RWKV-4 WKV written out plainly in double precision, with the same running-maximum scheme as the kernel (the
// quantity it defines, sum_i e^{w'(t-1-i) + k_i} v_i + e^{u + k_t} v_t over the same sum of weights, would
// overflow without it).
#include <algorithm>
#include <cmath>

#include "kernels/linear/rwkv4/problem.h"

namespace attnzoo {

void rwkv4_reference(const Rwkv4Args& args) {
  const Rwkv4Problem p = make_rwkv4_problem(args);
  for (int64_t s = 0; s < p.seqs.count(); ++s) {
    for (int64_t c = 0; c < p.C; ++c) {
      const int64_t base = s * 3 * p.C + c;
      double a = p.h0 ? p.h0[base] : 0.0, b = p.h0 ? p.h0[base + p.C] : 0.0, m = p.h0 ? p.h0[base + 2 * p.C] : -1e38;
      const double w = p.decay[size_t(c)], u = p.bonus[size_t(c)];
      for (int64_t i = 0; i < p.seqs.length[size_t(s)]; ++i) {
        const int64_t idx = (p.seqs.begin[size_t(s)] + i) * p.C + c;
        const double k = load_as_f32(p.k, p.k_dtype, idx), v = load_as_f32(p.v, p.v_dtype, idx);
        const double q = std::max(m, u + k);
        const double e1 = std::exp(m - q), e2 = std::exp(u + k - q);
        store_from_f32(p.out, p.out_dtype, idx, float((e1 * a + e2 * v) / (e1 * b + e2)));
        const double m2 = std::max(m + w, k);
        const double f1 = std::exp(m + w - m2), f2 = std::exp(k - m2);
        a = f1 * a + f2 * v;
        b = f1 * b + f2;
        m = m2;
      }
      if (p.ht) p.ht[base] = float(a), p.ht[base + p.C] = float(b), p.ht[base + 2 * p.C] = float(m);
    }
  }
}

}  // namespace attnzoo
