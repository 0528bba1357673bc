// The fused recurrent (decode) form of the gated linear recurrence: one token at a time, O(K V) per token.
// One task per (sequence, value head) keeps its [K, Vp] state in scratch for the whole sequence. Per token the
// state is swept once, a band of up to four vectors of columns at a time: each row is decayed, gets k_i v
// added, and is folded into the output band held in registers, so the state is read and written exactly once.
#include <algorithm>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/dispatch.h"
#include "core/threads.h"
#include "kernels/linear/common/gla_problem.h"
#include "kernels/linear/common/gla_rows.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/linear/common/gla_recurrent.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

struct RecurrentScratch {
  AlignedBuffer<float> S, q, k, v, decay, o;
};

// Columns [c0, c0 + kBand * L) of every state row: S_i = decay_i S_i + k_i v ; o += q_i S_i.
template <size_t kBand>
HWY_INLINE void StepBand(size_t K, size_t Vp, size_t c0, float* HWY_RESTRICT S, const float* HWY_RESTRICT q,
                         const float* HWY_RESTRICT k, const float* HWY_RESTRICT v, const float* HWY_RESTRICT decay,
                         float* HWY_RESTRICT o) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  using Vec = hn::Vec<decltype(d)>;
  Vec vv[kBand], acc[kBand];
  for (size_t b = 0; b < kBand; ++b) {
    vv[b] = hn::LoadU(d, v + c0 + b * L);
    acc[b] = hn::Zero(d);
  }
  for (size_t i = 0; i < K; ++i) {
    float* row = S + i * Vp + c0;
    const Vec a = hn::Set(d, decay[i]), ki = hn::Set(d, k[i]), qi = hn::Set(d, q[i]);
    for (size_t b = 0; b < kBand; ++b) {
      const Vec s = hn::MulAdd(a, hn::LoadU(d, row + b * L), hn::Mul(ki, vv[b]));
      hn::StoreU(s, d, row + b * L);
      acc[b] = hn::MulAdd(qi, s, acc[b]);
    }
  }
  for (size_t b = 0; b < kBand; ++b) hn::StoreU(acc[b], d, o + c0 + b * L);
}

void RunRecurrentTask(const GlaProblem& p, int64_t task) {
  static thread_local RecurrentScratch sc;
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  const int64_t n = task / p.HV, hv = task % p.HV, h = hv / p.group();
  const size_t K = size_t(p.K), Vp = size_t(gla_padded_width(p));
  sc.S.resize(K * Vp);
  sc.q.resize(K);
  sc.k.resize(K);
  sc.decay.resize(K);
  sc.v.resize(Vp);
  sc.o.resize(Vp);
  load_gla_state(p, n, hv, sc.S.data(), int64_t(Vp));
  std::fill(sc.decay.data(), sc.decay.data() + K, 1.f);
  for (int64_t t = 0; t < p.seqs.length[size_t(n)]; ++t) {
    const int64_t row = p.seqs.begin[size_t(n)] + t;
    load_gla_query(p, row, h, sc.q.data());
    load_gla_key(p, row, h, sc.k.data());
    load_gla_value(p, row, hv, sc.v.data(), int64_t(Vp));
    if (p.gate == GateKind::scalar) {
      std::fill(sc.decay.data(), sc.decay.data() + K, std::exp(gla_scalar_gate(p, row, hv)));
    } else if (p.gate == GateKind::channel) {
      load_gla_channel_gate(p, row, hv, sc.decay.data());
      size_t i = 0;
      for (; i + L <= K; i += L) hn::StoreU(hn::Exp(d, hn::LoadU(d, sc.decay.data() + i)), d, sc.decay.data() + i);
      for (; i < K; ++i) sc.decay[i] = std::exp(sc.decay[i]);
    }
    size_t c0 = 0;
    for (; c0 + 4 * L <= Vp; c0 += 4 * L)
      StepBand<4>(K, Vp, c0, sc.S.data(), sc.q.data(), sc.k.data(), sc.v.data(), sc.decay.data(), sc.o.data());
    for (; c0 < Vp; c0 += L)
      StepBand<1>(K, Vp, c0, sc.S.data(), sc.q.data(), sc.k.data(), sc.v.data(), sc.decay.data(), sc.o.data());
    store_gla_output(p, row, hv, sc.o.data());
  }
  store_gla_state(p, n, hv, sc.S.data(), int64_t(Vp));
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnzoo {
HWY_EXPORT(RunRecurrentTask);

void gated_linear_recurrent(const GlaProblem& p) {
  active_target();
  ThreadPool::global().parallel_for(p.num_tasks(), [&](int64_t task, int) {
    HWY_DYNAMIC_DISPATCH(RunRecurrentTask)(p, task);
  });
}

}  // namespace attnzoo
#endif
