// The definition of softmax attention, written for reading: one query row at a time, double accumulation.
#include <cmath>
#include <vector>

#include "kernels/softmax/attention.h"

namespace attnzoo {

void attention_prefill_reference(const AttentionProblem& p) {
  const MaskGeometry mask = mask_geometry(p.opts);
  std::vector<double> scores;
  std::vector<double> acc(size_t(p.Dv));
  for (const SeqSpan& s : p.seqs) {
    for (int64_t h = 0; h < p.Hq; ++h) {
      const int64_t hk = h / p.group();
      const float slope = p.opts.alibi_slopes ? p.opts.alibi_slopes[h] : 0.f;
      for (int64_t i = 0; i < s.Tq; ++i) {
        const int64_t qpos = s.Tk - s.Tq + i;
        const int64_t qbase = s.q_offset + i * p.qs.token + h * p.qs.head;
        scores.assign(size_t(s.Tk), -INFINITY);
        double m = p.opts.sinks ? double(p.opts.sinks[h]) : -INFINITY;
        for (int64_t j = 0; j < s.Tk; ++j) {
          if (!mask.visible(qpos, j)) continue;
          const int64_t kbase = p.k_row(s, j) + hk * p.ks.head;
          double dot = 0;
          for (int64_t d = 0; d < p.D; ++d)
            dot += double(load_as_f32(p.q, p.q_dtype, qbase + d)) * double(load_as_f32(p.k, p.kv_dtype, kbase + d));
          if (p.k_scale.data) dot *= double(p.k_scale.data[p.scale_row(p.k_scale, s, j) + hk * p.k_scale.head]);
          scores[size_t(j)] = transform_score(float(dot * p.scale), p.opts.softcap, slope, qpos, j);
          m = std::max(m, scores[size_t(j)]);
        }
        double denom = p.opts.sinks ? std::exp(double(p.opts.sinks[h]) - m) : 0.0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = 0; j < s.Tk; ++j) {
          if (scores[size_t(j)] == -INFINITY) continue;  // masked; a +inf score gives NaN, as in an exact softmax
          const double w = std::exp(scores[size_t(j)] - m);
          denom += w;
          const int64_t vbase = p.v_row(s, j) + hk * p.vs.head;
          const double wv =
              p.v_scale.data ? w * double(p.v_scale.data[p.scale_row(p.v_scale, s, j) + hk * p.v_scale.head]) : w;
          for (int64_t d = 0; d < p.Dv; ++d) acc[size_t(d)] += wv * double(load_as_f32(p.v, p.kv_dtype, vbase + d));
        }
        const int64_t obase = s.o_offset + i * p.os.token + h * p.os.head;
        // Nothing visible gives 0; a NaN score (which std::max passed over) or a +inf one makes denom NaN, and the
        // row NaN.
        for (int64_t d = 0; d < p.Dv; ++d)
          store_from_f32(p.o, p.o_dtype, obase + d, denom != 0 ? float(acc[size_t(d)] / denom) : 0.f);
      }
    }
  }
}

}  // namespace attnzoo
