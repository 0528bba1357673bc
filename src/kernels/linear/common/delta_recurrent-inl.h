// The delta-family recurrence for decode and short inputs: one token at a time, O(K V) per token, vectorised over
// the value dimension, one task per (sequence, value head). Include inside a per-target translation unit.
//
// Per token, with a the decay (1, a scalar, or one factor per key channel):
//   pass 1 over S:  p = (a S)^T k,  r = (a S)^T q          (both read S once, in registers per column panel)
//   u = beta (v - p),  o = r + (q . k) u                     (= S_new^T q without a second read for o)
//   pass 2 over S:  S <- a S + k u^T
// Columns are processed in panels of a few vectors so the panel of S stays in cache between the two passes:
// a decode step reads the state from memory once and writes it once, in place when final_state is
// initial_state (see DeltaStatePlan).
#if defined(ATTNZOO_DELTA_RECURRENT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNZOO_DELTA_RECURRENT_INL_H_
#undef ATTNZOO_DELTA_RECURRENT_INL_H_
#else
#define ATTNZOO_DELTA_RECURRENT_INL_H_
#endif

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/aligned_buffer.h"
#include "core/threads.h"
#include "kernels/linear/common/delta_problem.h"
#include "kernels/linear/common/delta_rows-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {

// Columns per panel, in vectors. With 32 vector registers (AVX-512) 8 vectors cover a whole 128-wide row, so
// pass 1 streams the state contiguously (measured about 20% faster than 4 at H=16, K=V=128, pass 2 then hits
// L2); with 16 registers 4 keeps both accumulator sets in registers and the panel in L1.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr size_t kDeltaPanel = 8;
#else
constexpr size_t kDeltaPanel = 4;
#endif

struct DeltaRecurrentScratch {
  AlignedBuffer<float> S, q, k, v, o, a, qa, ka;
};

// One column panel of kCols vectors starting at column `col` of a [K, stride] state: reads rows of `src`,
// writes the updated rows to `dst` (== src when updating in place; null when the new state is not needed: a
// single-token step without a final state). The panel is read from memory once in pass 1 and re-read from L1
// / L2 in pass 2, so each state byte crosses the memory bus once each way.
template <DeltaGate kGate, size_t kCols>
HWY_INLINE void DeltaRecurrentPanel(const float* src, float* dst, size_t stride, size_t K, size_t col,
                                    const float* qa, const float* ka, const float* a, const float* k, const float* v,
                                    float beta, float qk, float* HWY_RESTRICT o) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  using Vec = hn::Vec<decltype(d)>;
  Vec pk[kCols], pq[kCols], u[kCols];
  for (size_t c = 0; c < kCols; ++c) pk[c] = pq[c] = hn::Zero(d);
  for (size_t r = 0; r < K; ++r) {
    const float* row = src + r * stride + col;
    const Vec wk = hn::Set(d, ka[r]), wq = hn::Set(d, qa[r]);
    for (size_t c = 0; c < kCols; ++c) {
      const Vec s = hn::LoadU(d, row + c * L);
      pk[c] = hn::MulAdd(wk, s, pk[c]);
      pq[c] = hn::MulAdd(wq, s, pq[c]);
    }
  }
  const Vec vbeta = hn::Set(d, beta), vqk = hn::Set(d, qk);
  for (size_t c = 0; c < kCols; ++c) {
    u[c] = hn::Mul(vbeta, hn::Sub(hn::Load(d, v + col + c * L), pk[c]));
    hn::Store(hn::MulAdd(vqk, u[c], pq[c]), d, o + col + c * L);
  }
  if (dst == nullptr) return;
  for (size_t r = 0; r < K; ++r) {
    const float* in = src + r * stride + col;
    float* out = dst + r * stride + col;
    const Vec kr = hn::Set(d, k[r]);
    if (kGate == DeltaGate::none) {
      for (size_t c = 0; c < kCols; ++c) hn::StoreU(hn::MulAdd(kr, u[c], hn::LoadU(d, in + c * L)), d, out + c * L);
    } else {
      const Vec ar = hn::Set(d, kGate == DeltaGate::channel ? a[r] : a[0]);
      for (size_t c = 0; c < kCols; ++c)
        hn::StoreU(hn::MulAdd(kr, u[c], hn::Mul(ar, hn::LoadU(d, in + c * L))), d, out + c * L);
    }
  }
}

// Where one (sequence, head) task reads and writes its state. When V is a whole number of padded vectors the
// kernel works on the caller's buffers directly: the first token reads initial_state and writes final_state
// (the same buffer for an in-place update), later tokens update final_state in place; a single token without a
// final state is never written back. That keeps a decode step at one read and one write of the state. Other
// widths go through a zero-padded scratch copy.
struct DeltaStatePlan {
  const float* src = nullptr;  // the state the next token reads
  float* dst = nullptr;        // where that token writes (null: not written)
  float* copy_out = nullptr;   // padded mode: final_state, written from the scratch at the end
  size_t stride = 0;           // floats per state row in src / dst
};

inline DeltaStatePlan DeltaPlanState(const DeltaProblem& p, int64_t seq, int64_t hv, DeltaRecurrentScratch& sc) {
  const size_t K = size_t(p.K), V = size_t(p.V), Vp = DeltaPadded(p.V);
  const int64_t length = p.seqs.length[size_t(seq)];
  const float* init = p.initial_state ? p.initial_state + p.state_offset(seq, hv) : nullptr;
  float* fin = p.final_state ? p.final_state + p.state_offset(seq, hv) : nullptr;
  DeltaStatePlan plan;
  if (Vp == V) {
    plan.stride = V;
    plan.dst = fin;
    if (!fin && (length > 1 || !init)) {  // intermediate states need a home that is not the caller's input
      sc.S.resize(K * V);
      plan.dst = sc.S.data();
    }
    if (!init) {
      std::fill(plan.dst, plan.dst + K * V, 0.f);
      init = plan.dst;
    } else if (length == 0 && fin && fin != init) {
      std::memcpy(fin, init, K * V * sizeof(float));
    }
    plan.src = init;
    return plan;
  }
  sc.S.resize(K * Vp);
  float* S = sc.S.data();
  std::fill(S, S + K * Vp, 0.f);  // padding columns stay zero because v's padding is zero
  if (init)
    for (size_t r = 0; r < K; ++r) std::memcpy(S + r * Vp, init + r * V, V * sizeof(float));
  plan.src = plan.dst = S;
  plan.copy_out = fin;
  plan.stride = Vp;
  return plan;
}

template <DeltaGate kGate>
void DeltaRecurrentHead(const DeltaProblem& p, int64_t seq, int64_t hv) {
  static thread_local DeltaRecurrentScratch sc;
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  const size_t K = size_t(p.K), V = size_t(p.V), Kp = DeltaPadded(p.K), Vp = DeltaPadded(p.V);
  const int64_t h = hv / p.group();
  for (auto* b : {&sc.q, &sc.k, &sc.a, &sc.qa, &sc.ka}) b->resize(Kp);
  sc.v.resize(Vp);
  sc.o.resize(Vp);
  DeltaStatePlan plan = DeltaPlanState(p, seq, hv, sc);
  std::fill(sc.a.data(), sc.a.data() + Kp, 1.f);

  for (int64_t t = 0; t < p.seqs.length[size_t(seq)]; ++t) {
    const int64_t row = p.seqs.begin[size_t(seq)] + t;
    DeltaLoadRow(p.q, p.qk_offset(row, h), p.K, sc.q.data(), p.l2norm, p.scale);
    DeltaLoadRow(p.k, p.qk_offset(row, h), p.K, sc.k.data(), p.l2norm, 1.f);
    DeltaLoadRow(p.v, p.v_offset(row, hv), p.V, sc.v.data(), false, 1.f);
    const float beta = p.beta.empty() ? 1.f : DeltaLoadScalar(p.beta, row * p.HV + hv);
    const float* qa = sc.q.data();
    const float* ka = sc.k.data();
    if (kGate == DeltaGate::head) {
      const float a = std::exp(DeltaLoadScalar(p.g, p.gate_offset(row, hv)));
      sc.a[0] = a;
      for (size_t r = 0; r < Kp; ++r) {
        sc.qa[r] = a * sc.q[r];
        sc.ka[r] = a * sc.k[r];
      }
      qa = sc.qa.data();
      ka = sc.ka.data();
    } else if (kGate == DeltaGate::channel) {
      DeltaLoadRow(p.g, p.gate_offset(row, hv), p.K, sc.a.data(), false, 1.f);
      for (size_t r = 0; r < Kp; r += L) {
        const auto a = hn::Exp(d, hn::Load(d, sc.a.data() + r));
        hn::Store(a, d, sc.a.data() + r);
        hn::Store(hn::Mul(a, hn::Load(d, sc.q.data() + r)), d, sc.qa.data() + r);
        hn::Store(hn::Mul(a, hn::Load(d, sc.k.data() + r)), d, sc.ka.data() + r);
      }
      qa = sc.qa.data();
      ka = sc.ka.data();
    }
    const float qk = DeltaDot(sc.q.data(), sc.k.data(), Kp);
    const size_t width = plan.stride;
    size_t col = 0;
    for (; col + kDeltaPanel * L <= width; col += kDeltaPanel * L)
      DeltaRecurrentPanel<kGate, kDeltaPanel>(plan.src, plan.dst, plan.stride, K, col, qa, ka, sc.a.data(),
                                              sc.k.data(), sc.v.data(), beta, qk, sc.o.data());
    for (; col < width; col += L)
      DeltaRecurrentPanel<kGate, 1>(plan.src, plan.dst, plan.stride, K, col, qa, ka, sc.a.data(), sc.k.data(),
                                    sc.v.data(), beta, qk, sc.o.data());
    plan.src = plan.dst;
    convert_from_f32(sc.o.data(),
                     static_cast<char*>(p.o.data) + p.v_offset(row, hv) * int64_t(dtype_size(p.o.dtype)), p.o.dtype,
                     V);
  }
  if (plan.copy_out)
    for (size_t r = 0; r < K; ++r) std::memcpy(plan.copy_out + r * V, plan.src + r * Vp, V * sizeof(float));
}

template <DeltaGate kGate>
void DeltaRecurrent(const DeltaProblem& p) {
  ThreadPool::global().parallel_for(p.seqs.count() * p.HV,
                                    [&](int64_t task, int) { DeltaRecurrentHead<kGate>(p, task / p.HV, task % p.HV); });
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#endif  // include guard
