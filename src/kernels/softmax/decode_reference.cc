// The definition of decode attention, written for reading: one query row at a time, double accumulation,
// keys fetched one by one through the block table. Query i of sequence b sits at position
// cache_seqlens[b] - Tq + i, so it sees the keys of the tokens before it and its own (bottom-right causal).
#include <cmath>
#include <vector>

#include "kernels/softmax/decode_problem.h"

namespace attnzoo {

void attention_decode_reference(const DecodeProblem& p) {
  const MaskGeometry mask = mask_geometry(p.opts);
  std::vector<double> scores, acc(size_t(p.Dv));
  for (int64_t b = 0; b < p.B; ++b) {
    const int64_t len = p.seqlens[b];
    for (int64_t h = 0; h < p.Hq; ++h) {
      const int64_t hk = h / p.group();
      const float slope = p.opts.alibi_slopes ? p.opts.alibi_slopes[h] : 0.f;
      for (int64_t i = 0; i < p.Tq; ++i) {
        const int64_t qpos = len - p.Tq + i;
        const int64_t qbase = b * p.q_batch + i * p.q_token + h * p.q_head;
        scores.assign(size_t(len), -INFINITY);
        double m = p.opts.sinks ? double(p.opts.sinks[h]) : -INFINITY;
        for (int64_t j = 0; j < len; ++j) {
          if (!mask.visible(qpos, j)) continue;
          const int64_t kbase = p.k_offset(b, j, hk);
          double dot = 0;
          for (int64_t d = 0; d < p.D; ++d)
            dot += double(load_as_f32(p.q, p.q_dtype, qbase + d)) * double(load_as_f32(p.k, p.kv_dtype, kbase + d));
          dot *= double(p.k_scale_at(b, j, hk));
          scores[size_t(j)] = transform_score(float(dot * p.scale), p.opts.softcap, slope, qpos, j);
          m = std::max(m, scores[size_t(j)]);
        }
        double denom = p.opts.sinks ? std::exp(double(p.opts.sinks[h]) - m) : 0.0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = 0; j < len; ++j) {
          if (scores[size_t(j)] == -INFINITY) continue;  // masked; a +inf score gives NaN, as in an exact softmax
          const double w = std::exp(scores[size_t(j)] - m);
          denom += w;
          const int64_t vbase = p.v_offset(b, j, hk);
          const double wv = w * double(p.v_scale_at(b, j, hk));
          for (int64_t d = 0; d < p.Dv; ++d) acc[size_t(d)] += wv * double(load_as_f32(p.v, p.kv_dtype, vbase + d));
        }
        const int64_t obase = b * p.o_batch + i * p.o_token + h * p.o_head;
        for (int64_t d = 0; d < p.Dv; ++d)
          store_from_f32(p.o, p.o_dtype, obase + d, denom != 0 ? float(acc[size_t(d)] / denom) : 0.f);
      }
    }
  }
}

void attention_decode_reference(const TensorView& q, const KvCacheView& cache, const TensorView& out,
                                const AttentionOptions& opts) {
  require_host(q, "q");  // the reference reads every tensor on the host
  attention_decode_reference(make_decode_problem(q, cache, out, opts));
}

}  // namespace attnzoo
