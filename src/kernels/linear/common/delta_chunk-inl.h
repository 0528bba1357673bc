// The chunked (prefill) delta rule for every gate kind: per (sequence, value head) task, chunks of C tokens are
// processed in order with the state carried between them. This file builds each chunk's operands (the decayed
// Gram matrices A and Aqk, [-beta Gamma K | beta V], Gamma Q, the keys decayed to the chunk end); the shared
// WY step in delta_wy-inl.h does the rest. Include inside a per-target translation unit.
//
// Decays never overflow: every factor is exp of a difference taken towards the future (G_later - G_earlier,
// G the in-chunk cumulative log decay, non-increasing), so it lies in [0, 1] and can only underflow.
//   * gated delta rule (one decay per head): A and Aqk are raw Gram products scaled by exp(G_i - G_j).
//   * KDA (one decay per key channel) cannot scale after the product; rows are split into 16-token sub-chunks.
//     For sub-chunk I starting at r0, with reference R = G_{r0-1}, the block of earlier columns j < r0 is the
//     GEMM (k_i exp(G_i - R)) . (k_j exp(R - G_j)): both factors <= 1. Inside the diagonal sub-chunk the decay
//     from j to i is built up by multiplying per-token decays exp(g) (no exp of a growing difference at all).
#if defined(ATTNZOO_DELTA_CHUNK_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNZOO_DELTA_CHUNK_INL_H_
#undef ATTNZOO_DELTA_CHUNK_INL_H_
#else
#define ATTNZOO_DELTA_CHUNK_INL_H_
#endif

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cstring>

#include "core/aligned_buffer.h"
#include "core/threads.h"
#include "kernels/linear/common/delta_problem.h"
#include "kernels/linear/common/delta_rows-inl.h"
#include "kernels/linear/common/delta_wy-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attnzoo {
namespace HWY_NAMESPACE {

struct DeltaChunkScratch {
  AlignedBuffer<float> S, q, k, v, beta, G, a, Akk, Aqk, T, rhs, Z, k_t, kd_t, tmp, left, ke;
};

// dst = x * exp(a - b) elementwise over n_padded floats; b == nullptr means exp(a).
HWY_INLINE void DeltaMulExpDiff(float* HWY_RESTRICT dst, const float* x, const float* a, const float* b,
                                size_t n_padded) {
  const hn::ScalableTag<float> d;
  for (size_t i = 0; i < n_padded; i += hn::Lanes(d)) {
    auto e = hn::Load(d, a + i);
    if (b) e = hn::Sub(e, hn::Load(d, b + i));
    hn::Store(hn::Mul(hn::Load(d, x + i), hn::Exp(d, e)), d, dst + i);
  }
}

// One decay factor e = exp(a - b) (b == nullptr: exp(a)) applied to two rows: y1 = s1 x1 e, y2 = x2 e.
HWY_INLINE void DeltaMulExpDiff2(float* HWY_RESTRICT y1, const float* x1, float s1, float* HWY_RESTRICT y2,
                                 const float* x2, const float* a, const float* b, size_t n_padded) {
  const hn::ScalableTag<float> d;
  const auto vs = hn::Set(d, s1);
  for (size_t i = 0; i < n_padded; i += hn::Lanes(d)) {
    auto e = hn::Load(d, a + i);
    if (b) e = hn::Sub(e, hn::Load(d, b + i));
    e = hn::Exp(d, e);
    hn::Store(hn::Mul(hn::Mul(hn::Load(d, x1 + i), vs), e), d, y1 + i);
    hn::Store(hn::Mul(hn::Load(d, x2 + i), e), d, y2 + i);
  }
}

// Keeps the causal part of both Gram matrices: A strictly lower and scaled by beta_i, Aqk lower with its
// diagonal; with a per-head gate, both multiplied by exp(G_i - G_j). Entries right of the kept part may hold
// anything (they were never written this chunk) and are replaced by zeros, not multiplied.
template <DeltaGate kGate>
HWY_INLINE void DeltaMaskGram(float* HWY_RESTRICT Akk, float* HWY_RESTRICT Aqk, size_t cp, const float* beta,
                              const float* G) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  for (size_t i = 0; i < cp; ++i) {
    const auto vi = hn::Set(d, float(i));
    const auto vbeta = hn::Set(d, beta[i]);
    for (size_t j = 0; j < cp; j += L) {
      const auto col = hn::Iota(d, float(j));
      auto a = hn::Load(d, Akk + i * cp + j), q = hn::Load(d, Aqk + i * cp + j);
      if (kGate == DeltaGate::head) {
        // Only j <= i is kept; elsewhere exp of a positive difference is discarded by the select below.
        const auto e = hn::Exp(d, hn::Min(hn::Sub(hn::Set(d, G[i]), hn::Load(d, G + j)), hn::Zero(d)));
        a = hn::Mul(a, e);
        q = hn::Mul(q, e);
      }
      hn::Store(hn::IfThenElseZero(hn::Lt(col, vi), hn::Mul(a, vbeta)), d, Akk + i * cp + j);
      hn::Store(hn::IfThenElseZero(hn::Le(col, vi), q), d, Aqk + i * cp + j);
    }
  }
}

// KDA's Gram matrices, sub-chunk by sub-chunk (see the file comment). G and a are [cp x Kp] cumulative log decay
// and per-token decay exp(g).
HWY_INLINE void DeltaChannelGram(DeltaChunkScratch& sc, size_t cp, size_t K, size_t Kp) {
  const float* q = sc.q.data();
  const float* k = sc.k.data();
  const float* G = sc.G.data();
  const float* a = sc.a.data();
  float* Akk = sc.Akk.data();
  float* Aqk = sc.Aqk.data();
  float* kl = sc.left.data();                     // 16 rows of k_i exp(G_i - R)
  float* ql = sc.left.data() + kDeltaBlock * Kp;  // 16 rows of q_i exp(G_i - R)
  float* ke = sc.ke.data();
  for (size_t r0 = 0; r0 < cp; r0 += kDeltaBlock) {
    if (r0 > 0) {
      const float* ref = G + (r0 - 1) * Kp;
      for (size_t i = 0; i < kDeltaBlock; ++i)
        DeltaMulExpDiff2(kl + i * Kp, k + (r0 + i) * Kp, 1.f, ql + i * Kp, q + (r0 + i) * Kp, G + (r0 + i) * Kp, ref,
                         Kp);
      for (size_t j = 0; j < r0; ++j) DeltaMulExpDiff(sc.tmp.data() + j * Kp, k + j * Kp, ref, G + j * Kp, Kp);
      DeltaTranspose(sc.tmp.data(), Kp, r0, K, sc.k_t.data(), r0);
      TileGemm(kDeltaBlock, r0, K, kl, Kp, sc.k_t.data(), r0, Akk + r0 * cp, cp, false);
      TileGemm(kDeltaBlock, r0, K, ql, Kp, sc.k_t.data(), r0, Aqk + r0 * cp, cp, false);
    }
    for (size_t j = r0; j < r0 + kDeltaBlock; ++j) {
      std::memcpy(ke, k + j * Kp, Kp * sizeof(float));
      Aqk[j * cp + j] = DeltaDot(q + j * Kp, ke, Kp);
      for (size_t i = j + 1; i < r0 + kDeltaBlock; ++i) {
        const hn::ScalableTag<float> d;
        for (size_t c = 0; c < Kp; c += hn::Lanes(d))
          hn::Store(hn::Mul(hn::Load(d, ke + c), hn::Load(d, a + i * Kp + c)), d, ke + c);
        Akk[i * cp + j] = DeltaDot(k + i * Kp, ke, Kp);
        Aqk[i * cp + j] = DeltaDot(q + i * Kp, ke, Kp);
      }
    }
  }
}

template <DeltaGate kGate>
void DeltaChunkHead(const DeltaProblem& p, int64_t seq, int64_t hv) {
  static thread_local DeltaChunkScratch sc;
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  const size_t K = size_t(p.K), V = size_t(p.V), Kp = DeltaPadded(p.K), Vp = DeltaPadded(p.V), ld = Kp + Vp;
  const size_t C = size_t(p.chunk_size);
  const int64_t h = hv / p.group();
  const bool channel = kGate == DeltaGate::channel;
  sc.S.resize(K * Vp);
  sc.q.resize(C * Kp);
  sc.k.resize(C * Kp);
  sc.v.resize(C * Vp);
  sc.beta.resize(C);
  sc.G.resize(channel ? C * Kp : C);
  sc.a.resize(channel ? C * Kp : 1);
  for (auto* b : {&sc.Akk, &sc.Aqk, &sc.T}) b->resize(C * C);
  sc.rhs.resize(C * ld);
  sc.Z.resize(2 * C * ld);
  sc.k_t.resize(K * C);
  sc.kd_t.resize(K * C);
  sc.tmp.resize(C * Kp);
  sc.left.resize(2 * kDeltaBlock * Kp);
  sc.ke.resize(Kp);
  float* S = sc.S.data();
  float* Z = sc.Z.data();

  std::fill(S, S + K * Vp, 0.f);
  if (p.initial_state) {
    const float* init = p.initial_state + p.state_offset(seq, hv);
    for (size_t r = 0; r < K; ++r) std::memcpy(S + r * Vp, init + r * V, V * sizeof(float));
  }

  const int64_t len = p.seqs.length[size_t(seq)];
  for (int64_t t0 = 0; t0 < len; t0 += int64_t(C)) {
    const size_t c = size_t(std::min<int64_t>(int64_t(C), len - t0));
    const size_t cp = DeltaPadded(int64_t(c));
    // Load the chunk; rows [c, cp) are zero tokens (k = v = beta = g = 0) that leave the state untouched.
    for (size_t i = 0; i < cp; ++i) {
      float* qi = sc.q.data() + i * Kp;
      float* ki = sc.k.data() + i * Kp;
      float* vi = sc.v.data() + i * Vp;
      if (i >= c) {
        std::fill(qi, qi + Kp, 0.f);
        std::fill(ki, ki + Kp, 0.f);
        std::fill(vi, vi + Vp, 0.f);
        sc.beta[i] = 0.f;
        if (kGate == DeltaGate::head) sc.G[i] = sc.G[i - 1];
        if (channel) {
          std::memcpy(sc.G.data() + i * Kp, sc.G.data() + (i - 1) * Kp, Kp * sizeof(float));
          std::fill(sc.a.data() + i * Kp, sc.a.data() + (i + 1) * Kp, 1.f);
        }
        continue;
      }
      const int64_t row = p.seqs.begin[size_t(seq)] + t0 + int64_t(i);
      DeltaLoadRow(p.q, p.qk_offset(row, h), p.K, qi, p.l2norm, p.scale);
      DeltaLoadRow(p.k, p.qk_offset(row, h), p.K, ki, p.l2norm, 1.f);
      DeltaLoadRow(p.v, p.v_offset(row, hv), p.V, vi, false, 1.f);
      sc.beta[i] = p.beta.empty() ? 1.f : DeltaLoadScalar(p.beta, row * p.HV + hv);
      if (kGate == DeltaGate::head) {
        const float g = DeltaLoadScalar(p.g, p.gate_offset(row, hv));
        sc.G[i] = (i == 0 ? 0.f : sc.G[i - 1]) + g;
      }
      if (channel) {
        float* gi = sc.a.data() + i * Kp;
        DeltaLoadRow(p.g, p.gate_offset(row, hv), p.K, gi, false, 1.f);
        float* Gi = sc.G.data() + i * Kp;
        for (size_t x = 0; x < Kp; x += L) {
          const auto g = hn::Load(d, gi + x);
          hn::Store(i == 0 ? g : hn::Add(hn::Load(d, Gi - Kp + x), g), d, Gi + x);
          hn::Store(hn::Exp(d, g), d, gi + x);
        }
      }
    }

    // Gram matrices A (keys against keys) and Aqk (queries against keys), causal and decayed.
    if (channel) {
      DeltaChannelGram(sc, cp, K, Kp);
      DeltaMaskGram<DeltaGate::none>(sc.Akk.data(), sc.Aqk.data(), cp, sc.beta.data(), nullptr);
    } else {
      DeltaTranspose(sc.k.data(), Kp, cp, K, sc.k_t.data(), cp);
      for (size_t r0 = 0; r0 < cp; r0 += kDeltaBlock) {
        TileGemm(kDeltaBlock, r0 + kDeltaBlock, K, sc.k.data() + r0 * Kp, Kp, sc.k_t.data(), cp,
                 sc.Akk.data() + r0 * cp, cp, false);
        TileGemm(kDeltaBlock, r0 + kDeltaBlock, K, sc.q.data() + r0 * Kp, Kp, sc.k_t.data(), cp,
                 sc.Aqk.data() + r0 * cp, cp, false);
      }
      DeltaMaskGram<kGate>(sc.Akk.data(), sc.Aqk.data(), cp, sc.beta.data(), sc.G.data());
    }
    DeltaUnitLowerInverse(sc.Akk.data(), cp, sc.T.data());

    // rhs = [-beta Gamma K | beta V]; Z's lower half = Gamma Q; kd_t = (K decayed to the chunk end)^T.
    const float* G_last = channel ? sc.G.data() + (cp - 1) * Kp : sc.G.data() + (cp - 1);
    for (size_t i = 0; i < cp; ++i) {
      float* r = sc.rhs.data() + i * ld;
      const float* ki = sc.k.data() + i * Kp;
      const float* qi = sc.q.data() + i * Kp;
      float* zq = Z + (cp + i) * ld;
      const auto vbeta = hn::Set(d, sc.beta[i]);
      if (channel) {
        const float* Gi = sc.G.data() + i * Kp;
        DeltaMulExpDiff2(r, ki, -sc.beta[i], zq, qi, Gi, nullptr, Kp);
        DeltaMulExpDiff(sc.tmp.data() + i * Kp, ki, G_last, Gi, Kp);
      } else {
        const float gamma = kGate == DeltaGate::head ? std::exp(sc.G[i]) : 1.f;
        const auto vk = hn::Set(d, -sc.beta[i] * gamma), vq = hn::Set(d, gamma);
        for (size_t x = 0; x < Kp; x += L) {
          hn::Store(hn::Mul(vk, hn::Load(d, ki + x)), d, r + x);
          hn::Store(hn::Mul(vq, hn::Load(d, qi + x)), d, zq + x);
        }
      }
      for (size_t x = 0; x < Vp; x += L) hn::Store(hn::Mul(vbeta, hn::Load(d, sc.v.data() + i * Vp + x)), d, r + Kp + x);
    }
    if (channel) {
      DeltaTranspose(sc.tmp.data(), Kp, cp, K, sc.kd_t.data(), cp);
    } else if (kGate == DeltaGate::head) {
      // k_t already holds K^T; scale column j by exp(G_last - G_j).
      for (size_t j = 0; j < cp; j += L) {
        const auto e = hn::Exp(d, hn::Sub(hn::Set(d, *G_last), hn::Load(d, sc.G.data() + j)));
        for (size_t r = 0; r < K; ++r)
          hn::Store(hn::Mul(e, hn::Load(d, sc.k_t.data() + r * cp + j)), d, sc.kd_t.data() + r * cp + j);
      }
    }

    const DeltaChunkOperands ops{cp, K, Kp, Vp, sc.T.data(), sc.Aqk.data(), sc.rhs.data(),
                                 kGate == DeltaGate::none ? sc.k_t.data() : sc.kd_t.data(), Z};
    DeltaChunkStep(ops, S, [&](float* state) {
      if (kGate == DeltaGate::head) {
        DeltaScale(state, K * Vp, std::exp(*G_last));
      } else if (channel) {
        for (size_t r = 0; r < K; ++r) DeltaScale(state + r * Vp, Vp, std::exp(G_last[r]));
      }
    });

    for (size_t i = 0; i < c; ++i) {
      const int64_t row = p.seqs.begin[size_t(seq)] + t0 + int64_t(i);
      convert_from_f32(Z + (cp + i) * ld + Kp,
                       static_cast<char*>(p.o.data) + p.v_offset(row, hv) * int64_t(dtype_size(p.o.dtype)),
                       p.o.dtype, V);
    }
  }
  if (p.final_state) {
    float* fin = p.final_state + p.state_offset(seq, hv);
    for (size_t r = 0; r < K; ++r) std::memcpy(fin + r * V, S + r * Vp, V * sizeof(float));
  }
}

template <DeltaGate kGate>
void DeltaChunk(const DeltaProblem& p) {
  ThreadPool::global().parallel_for(p.seqs.count() * p.HV,
                                    [&](int64_t task, int) { DeltaChunkHead<kGate>(p, task / p.HV, task % p.HV); });
}

}  // namespace HWY_NAMESPACE
}  // namespace attnzoo
HWY_AFTER_NAMESPACE();

#endif  // include guard
