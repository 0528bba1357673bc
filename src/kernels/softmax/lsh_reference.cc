// LSH attention as lsh.h defines it, written for reading: per (batch, head), sort the (round, bucket, position)
// triples, list each query's keys (its chunk and the chunk before it), softmax in double, then combine the
// rounds by their log-sum-exp. No tiles, no online softmax, no counting sort: the fast path's yardstick.
#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "kernels/softmax/lsh.h"

namespace attnzoo {

void lsh_attention_reference(const LshProblem& p) {
  const int64_t T = p.T, D = p.D, Dv = p.Dv, C = p.opts.chunk_length;
  const int64_t rounds = p.hashed() ? p.num_hashes : 1;
  for (int64_t b = 0; b < p.B; ++b) {
    for (int64_t h = 0; h < p.H; ++h) {
      std::vector<double> x(size_t(T * D)), key(size_t(T * D)), v(size_t(T * Dv));
      for (int64_t t = 0; t < T; ++t) {
        double ss = 0;
        for (int64_t d = 0; d < D; ++d) {
          x[size_t(t * D + d)] = load_as_f32(p.qk.data, p.qk.dtype, LshProblem::row(p.qk, b, t, h) + d);
          ss += x[size_t(t * D + d)] * x[size_t(t * D + d)];
        }
        const double norm = std::sqrt(ss / double(D) + kLshNormEpsilon) * std::sqrt(double(D));
        for (int64_t d = 0; d < D; ++d) key[size_t(t * D + d)] = x[size_t(t * D + d)] / norm;
        for (int64_t d = 0; d < Dv; ++d)
          v[size_t(t * Dv + d)] = load_as_f32(p.v.data, p.v.dtype, LshProblem::row(p.v, b, t, h) + d);
      }
      // Slot s of the rounds laid end to end holds position slot[s]. Without hashing: one round, in order.
      std::vector<std::array<int64_t, 3>> order;  // (round, bucket, position)
      for (int64_t r = 0; r < rounds; ++r)
        for (int64_t t = 0; t < T; ++t)
          order.push_back({r, p.hashed() ? int64_t(p.head_buckets(b, h)[r * T + t]) : 0, t});
      std::sort(order.begin(), order.end());
      const int64_t N = int64_t(order.size()), nchunks = (N + C - 1) / C;
      auto chunk_slots = [&](int64_t c, std::vector<int64_t>& out) {
        for (int64_t s = c * C; s < std::min(N, (c + 1) * C); ++s) out.push_back(order[size_t(s)][2]);
      };

      std::vector<double> lse(size_t(rounds * T)), o(size_t(rounds * T * Dv), 0.0);
      std::vector<int64_t> keys;
      std::vector<double> score;
      for (int64_t s = 0; s < N; ++s) {
        const int64_t r = order[size_t(s)][0], i = order[size_t(s)][2], c = s / C;
        keys.clear();
        if (nchunks > 1) chunk_slots((c + nchunks - 1) % nchunks, keys);
        chunk_slots(c, keys);
        score.assign(keys.size(), -INFINITY);
        double m = -INFINITY;
        for (size_t n = 0; n < keys.size(); ++n) {
          const int64_t j = keys[n];
          if (p.opts.causal && j > i) continue;
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += x[size_t(i * D + d)] * key[size_t(j * D + d)];
          score[n] = j == i ? kLshSelfScore : dot;
          m = std::max(m, score[n]);
        }
        double sum = 0;
        for (double sc : score) sum += std::exp(sc - m);
        lse[size_t(r * T + i)] = m + std::log(sum);
        for (size_t n = 0; n < keys.size(); ++n) {
          const double w = std::exp(score[n] - lse[size_t(r * T + i)]);
          for (int64_t d = 0; d < Dv; ++d) o[size_t((r * T + i) * Dv + d)] += w * v[size_t(keys[n] * Dv + d)];
        }
      }
      for (int64_t t = 0; t < T; ++t) {
        double m = -INFINITY, total = 0;
        for (int64_t r = 0; r < rounds; ++r) m = std::max(m, lse[size_t(r * T + t)]);
        for (int64_t r = 0; r < rounds; ++r) total += std::exp(lse[size_t(r * T + t)] - m);
        for (int64_t d = 0; d < Dv; ++d) {
          double y = 0;
          for (int64_t r = 0; r < rounds; ++r)
            y += std::exp(lse[size_t(r * T + t)] - m) / total * o[size_t((r * T + t) * Dv + d)];
          store_from_f32(p.out.data, p.out.dtype, LshProblem::row(p.out, b, t, h) + d, float(y));
        }
      }
    }
  }
}

}  // namespace attnzoo
