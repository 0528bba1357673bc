// RWKV-7 recurrence written out plainly in double precision.
#include <cmath>
#include <vector>

#include "kernels/linear/rwkv7/problem.h"

namespace attnzoo {

void rwkv7_reference(const Rwkv7Args& args) {
  require_rwkv7_host(args, "rwkv7_reference");
  const Rwkv7Problem p = make_rwkv7_problem(args);
  const int64_t K = p.K, V = p.V;
  std::vector<double> S(static_cast<size_t>(K * V)), sa(static_cast<size_t>(V));
  for (int64_t s = 0; s < p.seqs.count(); ++s) {
    for (int64_t h = 0; h < p.H; ++h) {
      const int64_t base = (s * p.H + h) * K * V;
      for (int64_t i = 0; i < K * V; ++i) S[size_t(i)] = p.h0 ? p.h0[base + i] : 0.0;
      for (int64_t t = 0; t < p.seqs.length[size_t(s)]; ++t) {
        const int64_t row = p.seqs.begin[size_t(s)] + t, kb = (row * p.H + h) * K, vb = (row * p.H + h) * V;
        std::fill(sa.begin(), sa.end(), 0.0);
        for (int64_t i = 0; i < K; ++i) {
          const double ai = load_as_f32(p.a, p.a_dtype, kb + i);
          for (int64_t j = 0; j < V; ++j) sa[size_t(j)] += ai * S[size_t(i * V + j)];
        }
        for (int64_t i = 0; i < K; ++i) {
          const double decay = std::exp(double(load_as_f32(p.w, p.w_dtype, kb + i)));
          const double bi = load_as_f32(p.b, p.b_dtype, kb + i), ki = load_as_f32(p.k, p.k_dtype, kb + i);
          for (int64_t j = 0; j < V; ++j)
            S[size_t(i * V + j)] = decay * S[size_t(i * V + j)] + bi * sa[size_t(j)] +
                                   ki * double(load_as_f32(p.v, p.v_dtype, vb + j));
        }
        for (int64_t j = 0; j < V; ++j) {
          double o = 0;
          for (int64_t i = 0; i < K; ++i) o += double(load_as_f32(p.r, p.r_dtype, kb + i)) * S[size_t(i * V + j)];
          store_from_f32(p.o, p.o_dtype, vb + j, float(o * p.scale));
        }
      }
      if (p.ht)
        for (int64_t i = 0; i < K * V; ++i) p.ht[base + i] = float(S[size_t(i)]);
    }
  }
}

}  // namespace attnzoo
