// The split-K merge: chunks of one (sequence, kv heads) each left the running max m, sum l and unnormalised
// output o of every query row; the exact softmax over their union follows from the log-sum-exp rule.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/convert.h"
#include "kernels/softmax/decode_problem.h"

namespace attnzoo {

// Combines the chunks of one (sequence, kv heads): each row's output is sum_c e^(m_c - M) o_c divided by
// sum_c e^(m_c - M) l_c (plus the sink's e^(sink - M)), with M the largest of the chunk maxima and the sink.
void merge_decode_chunks(const DecodeProblem& p, const DecodePlan& plan, const DecodePlan::Merge& mg,
                         const float* partials) {
  const int64_t G = p.group(), R = p.rows(), HR = plan.heads_per_task * R, Dv = p.Dv;
  const size_t slot_floats = size_t(HR * (Dv + 2));
  static thread_local std::vector<float> acc;  // keeps its capacity: a warm decode step allocates nothing
  acc.resize(size_t(Dv));
  const size_t o_elem = dtype_size(p.o_dtype);
  for (int64_t x = 0; x < HR; ++x) {
    const int64_t t = (x % R) / G, h = (mg.hk_begin + x / R) * G + x % G;
    float M = p.opts.sinks ? p.opts.sinks[h] : -INFINITY;
    for (int64_t s = 0; s < mg.num_slots; ++s)
      M = std::max(M, partials[size_t(mg.first_slot + s) * slot_floats + size_t(x)]);
    std::fill(acc.begin(), acc.end(), 0.f);
    float l = 0.f;
    if (M != -INFINITY) {
      if (p.opts.sinks) l = std::exp(p.opts.sinks[h] - M);
      for (int64_t s = 0; s < mg.num_slots; ++s) {
        const float* slot = partials + size_t(mg.first_slot + s) * slot_floats;
        if (slot[x] == -INFINITY) continue;
        const float w = std::exp(slot[x] - M);
        l += w * slot[HR + x];
        const float* o = slot + 2 * HR + x * Dv;
        for (int64_t d = 0; d < Dv; ++d) acc[size_t(d)] += w * o[d];
      }
    }
    const float inv = l > 0.f ? 1.f / l : 0.f;
    for (float& v : acc) v *= inv;
    const int64_t dst = mg.b * p.o_batch + t * p.o_token + h * p.o_head;
    convert_from_f32(acc.data(), static_cast<char*>(p.o) + dst * int64_t(o_elem), p.o_dtype, size_t(Dv));
  }
}

}  // namespace attnzoo
