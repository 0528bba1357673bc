// MLA as DeepSeek-V2 defines it (the naive form), written for reading: expand every latent row into per-head
// keys and values through kv_b_proj, then plain softmax attention, all in double.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/softmax/mla_problem.h"

namespace attnzoo {

void mla_run_reference(const MlaProblem& p) {
  const MlaDims& d = p.dims;
  const int64_t Dk = d.qk_dim();
  std::vector<double> keys, values, scores, acc(size_t(d.dv));
  std::vector<float> row(size_t(d.latent_dim()));
  for (const MlaSeq& s : p.seqs) {
    // keys [Tk, H, dn + dr] = [W_UK_h c_kv ; k_pe], values [Tk, H, dv] = W_UV_h c_kv.
    keys.assign(size_t(s.Tk * d.H * Dk), 0.0);
    values.assign(size_t(s.Tk * d.H * d.dv), 0.0);
    for (int64_t j = 0; j < s.Tk; ++j) {
      p.load_latent_row(s, j, row.data());
      for (int64_t h = 0; h < d.H; ++h) {
        double* key = &keys[size_t((j * d.H + h) * Dk)];
        double* value = &values[size_t((j * d.H + h) * d.dv)];
        for (int64_t i = 0; i < d.dn + d.dv; ++i) {
          const int64_t wrow = p.w_uk(h) + i * p.w_row;
          double dot = 0;
          for (int64_t c = 0; c < d.r; ++c)
            dot += double(load_as_f32(p.w, p.w_dtype, wrow + c)) * double(row[size_t(c)]);
          if (i < d.dn) key[i] = dot; else value[i - d.dn] = dot;
        }
        for (int64_t c = 0; c < d.dr; ++c) key[d.dn + c] = row[size_t(d.r + c)];
      }
    }
    for (int64_t h = 0; h < d.H; ++h) {
      for (int64_t i = 0; i < s.Tq; ++i) {
        const int64_t qpos = s.Tk - s.Tq + i;  // bottom-right aligned
        const int64_t qbase = s.q_offset + i * p.q_token + h * p.q_head;
        const int64_t visible = p.causal ? qpos + 1 : s.Tk;
        scores.assign(size_t(visible), 0.0);
        double m = -INFINITY;
        for (int64_t j = 0; j < visible; ++j) {
          const double* key = &keys[size_t((j * d.H + h) * Dk)];
          double dot = 0;
          for (int64_t c = 0; c < Dk; ++c) dot += double(load_as_f32(p.q, p.q_dtype, qbase + c)) * key[c];
          scores[size_t(j)] = dot * double(p.scale);
          m = std::max(m, scores[size_t(j)]);
        }
        double denom = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = 0; j < visible; ++j) {
          const double w = std::exp(scores[size_t(j)] - m);
          denom += w;
          const double* value = &values[size_t((j * d.H + h) * d.dv)];
          for (int64_t c = 0; c < d.dv; ++c) acc[size_t(c)] += w * value[c];
        }
        const int64_t obase = s.o_offset + i * p.o_token + h * p.o_head;
        for (int64_t c = 0; c < d.dv; ++c)
          store_from_f32(p.o, p.o_dtype, obase + c, denom != 0 ? float(acc[size_t(c)] / denom) : 0.f);
      }
    }
  }
}

}  // namespace attnzoo
